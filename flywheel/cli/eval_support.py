"""What every `galahad eval` subcommand shares: its progress bar, where its manifest goes, the manifest's head.

Its own module so that `cmd_eval` (which mounts the eval subcommands) and `cmd_eval_transfer` both
import it and neither imports the other's handlers: no import cycle.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from galahad.flywheel.config import Paths


@contextlib.contextmanager
def progress_bar(total: int, desc: str) -> Iterator[Callable[[], object]]:
    """A stderr progress bar; yields the callable that advances it by one."""
    from tqdm import tqdm

    bar = tqdm(total=total, desc=desc, unit="problem", file=sys.stderr, disable=not sys.stderr.isatty())
    try:
        yield lambda: bar.update(1)
    finally:
        bar.close()


def manifest_path(args: argparse.Namespace, paths: Paths, kind: str) -> Path:
    return args.out or paths.reports / f"{kind}-{time.strftime('%Y%m%dT%H%M%S')}.json"


def base_manifest(kind: str, engine, config: dict) -> dict:
    from galahad.flywheel.evals.spec import environment
    from galahad.workers.runtime import runtime_facts

    return {"kind": kind, "command": sys.argv[1:], "model": engine.loaded.name,
            "model_fingerprint": engine.model_fingerprint, "runtime_fingerprint": engine.runtime_fingerprint,
            "runtime": runtime_facts(engine.runtime), "environment": environment(), "config": config}
