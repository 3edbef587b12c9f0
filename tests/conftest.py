"""Shared test fixtures. The deterministic process env is pinned here, before anything imports torch."""

from galahad.workers.runtime import pin_process_env

pin_process_env()

import pytest  # noqa: E402

# --- model fixtures (lead) ---
MODEL_CACHE_DEFAULT = "~/.cache/galahad-models"


@pytest.fixture(scope="session")
def model_cache():
    """Converted model snapshots are data-independent and expensive (gemma: ~1 min): share them."""
    import os
    from pathlib import Path

    path = Path(os.environ.get("GALAHAD_MODEL_CACHE", MODEL_CACHE_DEFAULT)).expanduser()
    path.mkdir(parents=True, exist_ok=True)
    return path
