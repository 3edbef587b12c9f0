"""Invariant-mode cost: prefill and decode, stock vs invariant kernels, side by side in one process.

    python bench/bench_invariant.py                       # gemma3-270m, 512-token prompt, 32 decode steps
    python bench/bench_invariant.py --threads 1 --json    # one thread: immune to OpenMP barrier stalls
    python bench/bench_invariant.py --model tiny --prompt 128 --decode 16 --reps 3

Both engines (one per kernel mode, each its own model load) run the same token ids. Every repetition
runs stock and invariant back to back, alternating which goes first, so a noisy shared machine hurts both
alike. Prefill uses the pinned chunk schedule (`--chunk`); decode is one `Engine.forward` per token after
that prefill, greedy, each step timed alone (so a burst of load spoils a few samples, not a repetition).
Reported per mode: median and minimum of wall time and of process CPU time; ratios invariant / stock.
On a loaded machine prefer `--threads 1` CPU time: with 2 threads, every OpenMP barrier can wait for the
other thread's next time slice, and CPU time then counts the spinning.
The invariant run also checks its promise on the side: the tokens it decoded one at a time must be the
argmax of a one-pass forward's logits over the same sequence (reported, not timed).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from galahad.workers.runtime import RuntimeConfig, pin_process_env

pin_process_env()

import torch  # noqa: E402

from galahad.workers.engine import Engine  # noqa: E402
from galahad.workers.model_loader import load_model  # noqa: E402

Sample = tuple[float, float]  # (wall seconds, CPU seconds)


def _timed(fn):
    w, c = time.perf_counter(), time.process_time()
    out = fn()
    return out, (time.perf_counter() - w, time.process_time() - c)


def run_once(engine: Engine, prompt: list[int], steps: int) -> tuple[Sample, list[Sample], list[int]]:
    """(prefill time, time of each decode step, decoded ids)."""
    cache = engine.new_cache()
    logits, prefill = _timed(lambda: engine.prefill(cache, prompt, 0)[-1])
    out: list[int] = []
    step_times: list[Sample] = []
    for i in range(steps):
        tok = int(torch.argmax(logits))
        out.append(tok)
        logits, t = _timed(lambda tok=tok, i=i: engine.forward(cache, [tok], len(prompt) + i)[-1])
        step_times.append(t)
    return prefill, step_times, out


def summarise(samples: list[Sample], scale: float) -> dict:
    wall, cpu = [s[0] * scale for s in samples], [s[1] * scale for s in samples]
    return {
        "wall": {"median": round(statistics.median(wall), 3), "min": round(min(wall), 3)},
        "cpu": {"median": round(statistics.median(cpu), 3), "min": round(min(cpu), 3)},
        "n": len(samples),
    }


def ratios(stock: dict, inv: dict) -> dict:
    return {
        f"{clock}_{stat}": round(inv[clock][stat] / stock[clock][stat], 3)
        for clock in ("wall", "cpu")
        for stat in ("median", "min")
    }


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--cache", default="~/.cache/galahad-models")
    ap.add_argument("--prompt", type=int, default=512, help="prompt tokens (prefilled in chunks)")
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--decode", type=int, default=32, help="decode steps timed after each prefill")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", type=int, default=RuntimeConfig().threads)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)

    cache_dir = Path(args.cache).expanduser()
    engines = {}
    for mode in ("stock", "invariant"):
        rt = RuntimeConfig(kernel_mode=mode, prefill_chunk=args.chunk, threads=args.threads)
        engines[mode] = Engine(load_model(args.model, cache_dir, rt), rt)
    vocab = engines["stock"].model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    prompt = [engines["stock"].tokenizer.bos_token_id or 2]
    prompt += torch.randint(10, min(vocab, 20_000), (args.prompt - 1,), generator=gen).tolist()

    for engine in engines.values():  # warm-up: first calls pay allocator, primitive and packing set-up
        run_once(engine, prompt[: min(64, len(prompt))], 2)
    prefill: dict[str, list[Sample]] = {m: [] for m in engines}
    decode: dict[str, list[Sample]] = {m: [] for m in engines}
    tokens: dict[str, list[int]] = {}
    for rep in range(args.reps):
        for mode in list(engines) if rep % 2 == 0 else list(reversed(engines)):
            p, d, tokens[mode] = run_once(engines[mode], prompt, args.decode)
            prefill[mode].append(p)
            decode[mode].extend(d)
            print(
                f"rep {rep} {mode:9s} prefill wall {p[0]:7.2f} s cpu {p[1]:7.2f} s | decode wall median "
                f"{statistics.median(x[0] for x in d) * 1e3:7.1f} ms cpu median "
                f"{statistics.median(x[1] for x in d) * 1e3:7.1f} ms",
                file=sys.stderr,
            )

    inv = engines["invariant"]
    seq = prompt + tokens["invariant"][:-1]
    one_pass = inv.forward(inv.new_cache(), seq, 0)[len(prompt) - 1 :].argmax(-1).tolist()
    pre = {m: summarise(v, 1.0) for m, v in prefill.items()}
    dec = {m: summarise(v, 1e3) for m, v in decode.items()}
    report = {
        "model": args.model,
        "prompt_tokens": args.prompt,
        "prefill_chunk": args.chunk,
        "decode_steps": args.decode,
        "reps": args.reps,
        "threads": args.threads,
        "load_average_1min_at_end": round(os.getloadavg()[0], 2),
        "prefill_s": pre,
        "decode_ms_per_token": dec,
        "ratio_invariant_over_stock": {
            "prefill": ratios(pre["stock"], pre["invariant"]),
            "decode": ratios(dec["stock"], dec["invariant"]),
        },
        "greedy_tokens_equal_across_modes": tokens["stock"] == tokens["invariant"],
        "invariant_decode_equals_one_pass_argmax": one_pass == tokens["invariant"],
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for kind, unit in (("prefill", "s"), ("decode", "ms/token")):
            key = "prefill_s" if kind == "prefill" else "decode_ms_per_token"
            s, i = report[key]["stock"], report[key]["invariant"]
            r = report["ratio_invariant_over_stock"][kind]
            for clock in ("wall", "cpu"):
                print(
                    f"{kind:8s} {clock:4s} stock {s[clock]['median']:9.3f} (min {s[clock]['min']:9.3f})  "
                    f"invariant {i[clock]['median']:9.3f} (min {i[clock]['min']:9.3f}) {unit}  "
                    f"ratio {r[clock + '_median']:.2f}x (min {r[clock + '_min']:.2f}x)"
                )
        print(
            f"invariant token-by-token == one-pass argmax: {report['invariant_decode_equals_one_pass_argmax']}"
        )
    return report


if __name__ == "__main__":
    main()
