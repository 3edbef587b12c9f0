"""What every `galahad eval` subcommand shares: its progress (a bar on a terminal, else a line every few
seconds on stderr), where its manifest goes, the manifest's head. Its own module, so `cmd_eval` and
`cmd_eval_transfer` import it and not each other.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from galahad.flywheel.config import EVAL_PROGRESS_SECONDS, Paths
from galahad.flywheel.evals.spec import environment
from galahad.workers.runtime import runtime_facts


def _duration(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


class ProgressLines:
    """Progress for a stderr that is not a terminal (a log, a pipe, CI): a line at most every `every`
    seconds and one at the end: done/total, rate, elapsed and eta. `clock` is injectable for tests."""

    def __init__(self, total: int, desc: str, every: float = EVAL_PROGRESS_SECONDS, stream=None,
                 clock: Callable[[], float] = time.monotonic, unit: str = "problem"):
        self.total, self.desc, self.every, self.clock, self.unit = total, desc, every, clock, unit
        self.stream = stream if stream is not None else sys.stderr
        self.done, self.t0 = 0, clock()
        self.last = self.t0

    def line(self) -> str:
        elapsed = self.clock() - self.t0
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = _duration((self.total - self.done) / rate) if rate > 0 else "?"
        return (f"{self.desc}: {self.done}/{self.total} {self.unit}s, {rate:.2f}/s, elapsed {_duration(elapsed)}, "
                f"eta {eta}")

    def tick(self) -> None:
        self.done += 1
        now = self.clock()
        if now - self.last >= self.every or self.done == self.total:
            self.last = now
            print(self.line(), file=self.stream, flush=True)

    def close(self) -> None:
        if self.done != self.total:  # stopped early (an error): say how far it got
            print(self.line() + " (stopped)", file=self.stream, flush=True)


@contextlib.contextmanager
def progress_bar(total: int, desc: str, unit: str = "problem") -> Iterator[Callable[[], object]]:
    """Progress on stderr; yields the callable that advances it by one: a bar on a terminal, else a line
    every few seconds (`ProgressLines`), so a log shows an eval is alive and when it will end."""
    if sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=total, desc=desc, unit=unit, file=sys.stderr)
        try:
            yield lambda: bar.update(1)
        finally:
            bar.close()
        return
    lines = ProgressLines(total, desc, unit=unit)
    try:
        yield lines.tick
    finally:
        lines.close()


def manifest_path(args: argparse.Namespace, paths: Paths, kind: str) -> Path:
    return args.out or paths.reports / f"{kind}-{time.strftime('%Y%m%dT%H%M%S')}.json"


def base_manifest(kind: str, engine, config: dict) -> dict:
    return {"kind": kind, "command": sys.argv[1:], "model": engine.loaded.name,
            "model_fingerprint": engine.model_fingerprint, "runtime_fingerprint": engine.runtime_fingerprint,
            "runtime": runtime_facts(engine.runtime), "environment": environment(), "config": config}
