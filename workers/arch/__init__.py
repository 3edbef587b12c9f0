"""The architecture layer: which model families Galahad grafts exactly, and the one-line refusal for the rest.

`for_config(config)` (a loaded config) and `for_folder(folder)` (a model folder's config.json, read as
JSON before anything heavy is imported, so a refusal comes before any worker starts) return the family's
adapter (workers/arch/adapters.py) or raise GalahadError naming the architecture and the supported list.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from galahad.flywheel.errors import GalahadError
from galahad.workers.arch.adapters import FAMILIES
from galahad.workers.arch.base import Architecture, LayerSpec

__all__ = ["Architecture", "LayerSpec", "for_config", "for_folder", "for_model_type", "supported"]

BY_MODEL_TYPE: dict[str, Architecture] = {t: a for a in FAMILIES for t in a.model_types}
# Recurrent / state-space families: no per-position KV cache to deposit at all.
NO_KV_CACHE = ("mamba", "mamba2", "falcon_mamba", "rwkv", "xlstm", "recurrent_gemma")


def supported() -> list[str]:
    """The supported families, by adapter name (`gemma3`, `llama`, ...)."""
    return [a.name for a in FAMILIES]


def for_model_type(model_type: str | None, architectures: list[str] | None = None) -> Architecture:
    adapter = BY_MODEL_TYPE.get(str(model_type))
    if adapter is not None:
        return adapter
    named = ", ".join(str(a) for a in architectures or [])
    what = f"{named} (model_type {model_type!r})" if named else repr(model_type)
    why = " (it has no KV cache to graft)" if model_type in NO_KV_CACHE else ""
    raise GalahadError(f"architecture {what} is not supported{why}; supported: {', '.join(supported())}")


def for_config(config: Any) -> Architecture:
    adapter = for_model_type(getattr(config, "model_type", None), getattr(config, "architectures", None))
    adapter.check_config(config)
    return adapter


def for_folder(folder: Path) -> Architecture:
    """The adapter for a model folder, from its config.json alone (no transformers import)."""
    path = Path(folder) / "config.json"
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise GalahadError(f"cannot read {path}: {exc}") from exc
    if not isinstance(raw, dict):
        raise GalahadError(f"{path} is not a JSON object")
    archs = raw.get("architectures")
    return for_model_type(raw.get("model_type"), archs if isinstance(archs, list) else None)
