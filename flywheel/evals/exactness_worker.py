"""The exactness proof's depositor process: `python -m galahad.flywheel.evals.exactness_worker ...`.

Prints the deposited artifact ids as one JSON line. Kept separate so that the graft side of the proof
never shares a model instance, a cache or memory with the side that made the bytes.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from galahad.flywheel.artifacts.store import LocalStore
from galahad.workers.model_loader import load_model
from galahad.workers.runtime import DEFAULT_RUNTIME, pin_process_env


def main(argv: list[str]) -> int:
    spec, cache, mode, samples, seed, store_dir = argv
    runtime = DEFAULT_RUNTIME.with_(kernel_mode=mode)
    pin_process_env(runtime)
    from galahad.flywheel.evals.exactness import deposit_cases, make_cases  # deferred: torch after pinning
    from galahad.workers.engine import Engine  # deferred: torch after pinning

    engine = Engine(load_model(spec, Path(cache), runtime), runtime)
    window = engine.loaded.sliding_window or 64  # the architecture adapter's smallest window
    cases = make_cases(engine.model.config.vocab_size, window, int(samples), int(seed))
    print(json.dumps(deposit_cases(engine, cases, LocalStore(store_dir))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
