"""What the learning job's generators compute in, chosen by measurement on this CPU (`--sampler-dtype auto`).

Sampled text is verified text whatever computed it, so a generator may run any kernel mode and dtype that is
deterministic per seed; the depositor keeps the job's mode, and a deposit is grafted under the mode that made it.
Which candidate samples fastest depends on the CPU (`codes` was 0.87x-1.55x `stock` across CPUs; bfloat16 pays
only where the CPU computes it natively), so `auto` times each one once, on the job's shape, and keeps the
fastest. Candidates: stock/float32, codes/float32 where its kernels build here, stock/bfloat16 where `native_bf16`.

The timing (`time_step`): the generators' runtime (one thread, grouped attention), a batch of `ROWS` rows
prefilled with `PROMPT` tokens, then `STEPS` decode steps; the figure is the median step. Each candidate is timed
in its own process (a kernel mode patches the model it loads). The record (`choice.json` beside the converted
models) is keyed by the CPU, torch, the model as named and the candidate set, so a machine measures once per
model; it decides speed only, never bits (each generator's runtime fingerprint names what it ran).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

from galahad.flywheel.artifacts.store import atomic_write
from galahad.flywheel.errors import GalahadError
from galahad.kernels.cpu import cpuinfo
from galahad.kernels.modes import mode_class
from galahad.workers.runtime import DEFAULT_RUNTIME, GeneratorRuntime, native_bf16, pin_process_env

ROWS, PROMPT, STEPS = 16, 24, 6
RECORD = "choice.json"
TIMEOUT_S = 600


def candidates() -> list[tuple[str, str]]:
    """(kernel mode, dtype) pairs a generator may run on this CPU."""
    out = [("stock", "float32")]
    if mode_class("codes").unavailable("cpu") is None:
        out.append(("codes", "float32"))
    if native_bf16():
        out.append(("stock", "bfloat16"))
    return out


def time_step(model: str, cache: str, mode: str, dtype: str) -> float:
    """Seconds per batched decode step of a generator computing in (mode, dtype), in this process."""
    from galahad.workers.engine import Engine  # deferred: torch loads after `pin_process_env` (below)
    from galahad.workers.model_loader import load_model  # deferred: loads transformers

    runtime = GeneratorRuntime(compute_dtype=dtype, kernel_mode=mode).apply(DEFAULT_RUNTIME)
    engine = Engine(load_model(model, Path(cache), runtime), runtime)
    vocab = engine.model.config.vocab_size
    rows = [[(7 + 31 * r + 17 * i) % vocab for i in range(PROMPT)] for r in range(ROWS)]
    seconds = []
    cache_ = engine.new_cache()
    logits, _ = engine.prefill_rows(cache_, rows, 0)  # rows of one length: no padding, no mask after
    for step in range(STEPS):
        tokens = [int(t) for t in logits.argmax(-1)]
        t0 = time.perf_counter()
        logits = engine.forward_rows(cache_, tokens, [PROMPT + step] * ROWS)
        seconds.append(time.perf_counter() - t0)
    return statistics.median(seconds[1:])


def _key(model: str, pairs: list[tuple[str, str]]) -> str:
    import torch

    cpu = cpuinfo().get("model name", "?")
    return json.dumps([cpu, torch.__version__, model, ROWS, PROMPT, [list(p) for p in pairs]])


def choose(model: str, cache: str, record_path: Path | None = None) -> tuple[str, str, dict[str, float]]:
    """The fastest (kernel mode, dtype) for sampling here, and every candidate's seconds per step (measured
    now, or read from the record of an earlier measurement on this CPU: `record_path`, by default beside the
    converted models)."""
    pairs = candidates()
    if len(pairs) == 1:
        return (*pairs[0], {})
    path = record_path or Path(cache) / RECORD
    key = _key(model, pairs)
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        record = {}
    names = [f"{m}/{d}" for m, d in pairs]
    if not isinstance(record, dict):
        record = {}
    seconds = record.get(key)
    if not isinstance(seconds, dict) or not all(isinstance(seconds.get(n), float) for n in names):
        print(f"galahad: timing the sampler's kernels on this CPU once ({', '.join(f'{m}/{d}' for m, d in pairs)}; "
              "about 30 s each for the default model)", file=sys.stderr, flush=True)
        seconds = record[key] = {f"{m}/{d}": _time_in_child(model, cache, m, d) for m, d in pairs}
        atomic_write(path, json.dumps(record, indent=1).encode())
    best = min(pairs, key=lambda p: seconds[f"{p[0]}/{p[1]}"])  # the first of equals: candidates' order
    return (*best, seconds)


def _time_in_child(model: str, cache: str, mode: str, dtype: str) -> float:
    proc = subprocess.run([sys.executable, "-m", "galahad.workers.sampler_choice", model, cache, mode, dtype],
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise GalahadError(f"timing the sampler in {mode}/{dtype} failed: {last[:300]}")
    return float(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":  # python -m galahad.workers.sampler_choice MODEL CACHE MODE DTYPE
    pin_process_env(GeneratorRuntime().apply(DEFAULT_RUNTIME))
    print(time_step(*sys.argv[1:5]))
