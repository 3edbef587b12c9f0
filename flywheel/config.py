"""Galahad's top-level defaults (model, data dir, env names), the data-dir layout, and the run's configs.

Each concern's defaults live in one frozen dataclass: `SeedConfig` and `WorkerConfig` here,
`SamplingConfig` (workers/sampling.py), `LoopConfig` (learn/loop.py), `RetrievalPolicy` (memory/policy.py),
`RecurrenceConfig` and `TransferConfig` (evals/). The CLI reads its defaults from them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from galahad.flywheel.problems.families import DEFAULT_FAMILIES

DEFAULT_MODEL = "gemma3-270m"
DEFAULT_DATA = "~/.galahad"
DATA_ENV = "GALAHAD_HOME"
# The converted model snapshot is ~1 GB and data-independent: one cache shared by every data dir.
MODEL_CACHE_ENV = "GALAHAD_MODEL_CACHE"
CATALOG_ENV = "GALAHAD_CATALOG"


def model_cache() -> Path:
    """`$GALAHAD_MODEL_CACHE`, else `$XDG_CACHE_HOME/galahad`, else `~/.cache/galahad` (never a data dir)."""
    shared = os.environ.get(MODEL_CACHE_ENV)
    if shared:
        return Path(shared).expanduser().resolve()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return (base / "galahad").resolve()


@dataclass(frozen=True)
class Paths:
    """Where everything lives under one data dir (catalog, artifact store, reports), and the model cache."""

    root: Path

    @classmethod
    def resolve(cls, data: str | os.PathLike | None = None) -> Paths:
        raw = data or os.environ.get(DATA_ENV) or DEFAULT_DATA
        return cls(Path(raw).expanduser().resolve())

    @property
    def catalog_url(self) -> str:
        return f"sqlite:///{self.root / 'catalog.sqlite3'}"

    def resolve_catalog(self, url: str | None) -> str:
        """`--catalog URL`, else env GALAHAD_CATALOG, else the embedded SQLite file in the data dir."""
        return url or os.environ.get(CATALOG_ENV) or self.catalog_url

    @property
    def store(self) -> Path:
        return self.root / "store"

    @property
    def models(self) -> Path:
        """The shared model cache (`model_cache()`): not inside the data dir."""
        return model_cache()

    @property
    def reports(self) -> Path:
        return self.root / "reports"

    def ensure(self) -> Paths:
        for p in (self.root, self.store, self.reports):
            p.mkdir(parents=True, exist_ok=True)
        return self


@dataclass(frozen=True)
class SeedConfig:
    """What `galahad run` puts in the work queue when no problem file is given."""

    families: tuple[str, ...] = DEFAULT_FAMILIES
    per_family: int = 24
    seed: int = 0


@dataclass(frozen=True)
class WorkerConfig:
    """How many generator actors, and how long a library chain may grow before a new one starts."""

    generators: int = 1
    chain_max_tokens: int = 4096


@dataclass(frozen=True)
class GcConfig:
    """`catalog gc`: how old an orphan must be, and the most of the store one gc may delete unforced."""

    grace_seconds: float = 3600.0
    max_fraction: float = 0.5  # deleting more than this fraction of the store's blobs needs --force
