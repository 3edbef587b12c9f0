"""Invariant-mode cost: prefill and decode, stock vs invariant kernels, side by side in one process.

    python bench/bench_invariant.py                          # gemma3-270m, 512-token prompt, 32 decode steps
    python bench/bench_invariant.py --model tiny --prompt 128 --decode 16 --reps 3 --json

Both engines (one per kernel mode, each its own model load) run the same token ids. Every repetition
runs stock and invariant back to back, alternating which goes first, so a noisy shared machine hurts both
alike; the ratio is reported from medians (typical) and from minima (least disturbed). Decode times are
per step (every step of every repetition), so a burst of load on a shared machine spoils a few samples,
not a whole repetition. Prefill uses the
pinned chunk schedule (`--chunk`); decode is one `Engine.forward` per token after that prefill, greedy.
The invariant run also checks its own promise on the side: the greedy tokens it decodes one at a time
must equal a one-pass forward's logits argmax over the same sequence (reported, not timed).
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
from galahad.workers.models import load_model  # noqa: E402


def run_once(engine: Engine, prompt: list[int], steps: int) -> tuple[float, list[float], list[int]]:
    """(prefill seconds, seconds of each decode step, decoded ids)."""
    cache = engine.new_cache()
    t0 = time.perf_counter()
    logits = engine.prefill(cache, prompt, 0)[-1]
    prefill_s = time.perf_counter() - t0
    out: list[int] = []
    steps_s: list[float] = []
    for i in range(steps):
        tok = int(torch.argmax(logits))
        out.append(tok)
        t0 = time.perf_counter()
        logits = engine.forward(cache, [tok], len(prompt) + i)[-1]
        steps_s.append(time.perf_counter() - t0)
    return prefill_s, steps_s, out


def summarise(xs: list[float]) -> dict:
    return {"min": round(min(xs), 4), "median": round(statistics.median(xs), 4), "n": len(xs)}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--cache", default="~/.cache/galahad-models")
    ap.add_argument("--prompt", type=int, default=512, help="prompt tokens (prefilled in chunks)")
    ap.add_argument("--chunk", type=int, default=256)
    ap.add_argument("--decode", type=int, default=32, help="decode steps timed after the prefill")
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

    for engine in engines.values():  # warm-up: first calls pay allocator and primitive set-up
        run_once(engine, prompt[: min(64, len(prompt))], 2)
    prefill: dict[str, list[float]] = {m: [] for m in engines}
    decode: dict[str, list[float]] = {m: [] for m in engines}
    tokens: dict[str, list[int]] = {}
    for rep in range(args.reps):
        order = list(engines) if rep % 2 == 0 else list(reversed(engines))
        for mode in order:
            p, d, toks = run_once(engines[mode], prompt, args.decode)
            prefill[mode].append(p)
            decode[mode].extend(d)
            tokens[mode] = toks
            print(
                f"rep {rep} {mode:9s} prefill {p:7.3f} s  decode median {statistics.median(d) * 1000:7.1f} "
                f"min {min(d) * 1000:7.1f} ms/token",
                file=sys.stderr,
            )

    inv = engines["invariant"]
    seq = prompt + tokens["invariant"][:-1]
    one_pass = inv.forward(inv.new_cache(), seq, 0)[len(prompt) - 1 :].argmax(-1).tolist()
    report = {
        "model": args.model,
        "prompt_tokens": args.prompt,
        "prefill_chunk": args.chunk,
        "decode_steps": args.decode,
        "reps": args.reps,
        "threads": args.threads,
        "load_average_1min": os.getloadavg()[0],
        "prefill_s": {m: summarise(v) for m, v in prefill.items()},
        "decode_ms_per_token": {m: summarise([x * 1000 for x in v]) for m, v in decode.items()},
        "ratio": {
            "prefill_median": statistics.median(prefill["invariant"]) / statistics.median(prefill["stock"]),
            "prefill_min": min(prefill["invariant"]) / min(prefill["stock"]),
            "decode_median": statistics.median(decode["invariant"]) / statistics.median(decode["stock"]),
            "decode_min": min(decode["invariant"]) / min(decode["stock"]),
        },
        "greedy_tokens_equal_across_modes": tokens["stock"] == tokens["invariant"],
        "invariant_decode_equals_one_pass_argmax": one_pass == tokens["invariant"],
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        r = report["ratio"]
        for kind, key in (("prefill", "prefill_s"), ("decode", "decode_ms_per_token")):
            s, i = report[key]["stock"], report[key]["invariant"]
            print(
                f"{kind:8s} stock median {s['median']:.3f} (min {s['min']:.3f})  invariant median "
                f"{i['median']:.3f} (min {i['min']:.3f})  ratio median {r[kind + '_median']:.2f}x "
                f"min {r[kind + '_min']:.2f}x   [{key}]"
            )
        print(
            f"invariant token-by-token == one-pass argmax: {report['invariant_decode_equals_one_pass_argmax']}"
        )
    return report


if __name__ == "__main__":
    main()
