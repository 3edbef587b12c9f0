"""`galahad models`: the supported architectures (one adapter each, workers/arch/) and the models in the
model cache, each with the family its config.json names (or why it would be refused). Reads config files
only: no model is loaded, nothing is built."""

from __future__ import annotations

import argparse
import json

from galahad.flywheel.config import model_cache
from galahad.flywheel.errors import GalahadError
from galahad.workers import arch
from galahad.workers.model_loader import BUILDERS, SNAPSHOT_MARK


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("models", help="list the supported architectures and the models in the model cache")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=run)


def listing() -> dict:
    cache = model_cache()
    models = []
    folders = sorted(p for p in cache.iterdir() if p.is_dir() and not p.name.startswith(".")) if cache.is_dir() else []
    for folder in folders:
        if not (folder / "config.json").is_file():
            continue
        entry = {"name": folder.name, "path": str(folder), "built_in": folder.name in BUILDERS,
                 "complete": (folder / SNAPSHOT_MARK).is_file() or folder.name not in BUILDERS}
        try:
            entry["architecture"], entry["refused"] = arch.for_folder(folder).name, None
        except GalahadError as exc:
            entry["architecture"], entry["refused"] = None, str(exc)
        models.append(entry)
    return {"supported": arch.supported(), "built_in": sorted(BUILDERS), "model_cache": str(cache), "models": models}


def run(args: argparse.Namespace) -> int:
    out = listing()
    if args.json:
        print(json.dumps(out, sort_keys=True))
        return 0
    print(f"supported architectures: {', '.join(out['supported'])}")
    print(f"built-in models: {', '.join(out['built_in'])} (built into the cache on first use)")
    print(f"model cache {out['model_cache']}:")
    if not out["models"]:
        print("  (empty)")
    for m in out["models"]:
        what = m["architecture"] or f"refused: {m['refused']}"
        print(f"  {m['name']:<24} {what}{'' if m['complete'] else '  (incomplete build)'}")
    print("any local folder with config.json of a supported architecture also loads: --model PATH")
    return 0
