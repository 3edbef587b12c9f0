"""`galahad serve` under load: 32 concurrent clients, recurrence hits and misses, against the default model.

Usage: .venv/bin/python bench/bench_serve.py [--model gemma3-270m] [--kernel-mode auto] [--clients 32]
       [--seconds 60] [--single-seconds 30] [--hits 6] [--misses 6] [--reps 3] [--no-load] [--json]
(`--no-load`: only the single-client comparisons of 1., not the load phases 2. and 3.)

Set-up: a fresh data dir seeded with verified, deposited solutions for `--hits` problems of distinct templates
(one library each, deposited by one depositor under the kernel mode the server runs, `--kernel-mode` resolved
as `serve` resolves it); `--misses` problems of the same families are not in memory. The service runs with
`--no-learn` (one answering replica): this measures answering, not learning. Measured side by side in one run:
  1. single client, interleaved: a hash hit over HTTP (`/v1/solve`) vs the same problem answered in this
     process by the product's one walk (`Solver.solve`: catalog lookup, graft, query forward, decode, verify,
     computed-value check) on the same kind of engine and store; the same hit through the OpenAI-compatible
     `/v1/chat/completions` (which goes first alternates by rep): `hit_chat_over_solve`; and a base answer
     (a miss: the base model's few-shot answer) over HTTP on the same replica: `base_over_hit`. Each reply's
     `Server-Timing` header (`flywheel/service/request.py`) gives the replica's stages; `outside_replica` is
     the client's time less the replica's (the HTTP hops and Serve's proxy -> replica handle). Each
     problem's first hit on the fresh replica (`hit_http_cold_*`) reads the decode the depositor stored
     beside its recall artifact (`catalog.recall_answers`: no forward pass); the same hit asked with
     `model_decode` is grafted and decoded now (`hit_http_model_decode_*`), and both answers must be the
     in-process walk's, byte for byte; later hits are read from the replica's recall memo
     (`service/recall_memo.py`), which is what `hit_http_*` measures.
     Run it at the replica's priority (no `nice`): Serve's replica runs at nice 0, and the in-process side
     must not be starved by it;
  2. one client looping hits and misses for `--single-seconds`: requests/s;
  3. `--clients` clients doing the same for `--seconds`: requests/s, p50/p99 per answer path, errors.
The last line with --json is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from serve_harness import Served, seed_solutions, serve_env  # noqa: E402


def pick(n_hits: int, n_misses: int) -> tuple[list, list]:
    from galahad.flywheel.problems.families import generate

    pool = [p for f in ("add1", "mul1", "sub1", "add2x1") for p in generate(f, 40, seed=7)]
    hits, templates = [], set()
    for p in pool:
        if p.template not in templates and len(hits) < n_hits:
            templates.add(p.template)
            hits.append(p)
    rest = [p for p in pool if p not in hits]
    return hits, rest[:n_misses]


def post(url: str, text: str, model: str | None = None, stages: dict | None = None,
         extra: dict | None = None) -> tuple[float, dict]:
    """`/v1/solve` (with `extra` fields), or with `model` the same problem as one user message to
    `/v1/chat/completions`; with `stages`, the reply's Server-Timing stages (ms) are put in it, and
    `outside_replica` (ms)."""
    body = {"problem": text, **(extra or {})} if model is None else {
        "model": model, "messages": [{"role": "user", "content": text}]}
    req = urllib.request.Request(url + ("/v1/solve" if model is None else "/v1/chat/completions"), method="POST",
                                 data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=900) as r:
        raw, timing = r.read(), r.headers.get("Server-Timing")
    dt = time.perf_counter() - t0
    if stages is not None:
        from galahad.flywheel.service.request import parse_server_timing as parse

        stages.update(parse(timing))
        stages["outside_replica"] = 1000 * dt - stages.get("replica", 0.0)
    return dt, json.loads(raw)


def load(url: str, texts: list[str], clients: int, seconds: float) -> dict:
    results, errors, lock = [], [], threading.Lock()
    stop_at = time.perf_counter() + seconds

    def client(c: int) -> None:
        i = c
        while time.perf_counter() < stop_at:
            try:
                dt, body = post(url, texts[i % len(texts)])
                with lock:
                    results.append((dt, body["path"]))
            except Exception as exc:  # counted, never hidden
                with lock:
                    errors.append(f"{type(exc).__name__}: {str(exc)[:100]}")
            i += 1

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0  # includes draining requests in flight at the deadline
    by_path: dict[str, list[float]] = {}
    for dt, path in results:
        by_path.setdefault(path, []).append(dt)
    return {"clients": clients, "seconds": round(wall, 1), "requests": len(results), "errors": len(errors),
            "error_samples": errors[:3], "req_per_s": len(results) / wall,
            "paths": {p: {"n": len(v), "p50_s": round(q(v, 0.5), 3), "p99_s": round(q(v, 0.99), 3)}
                      for p, v in sorted(by_path.items())}}


def q(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(p * len(s)))]


def medians(rows: list[dict]) -> dict[str, float]:
    """Each stage's median (ms) over the replies (a stage a reply lacks counts as 0)."""
    names = list(dict.fromkeys(k for r in rows for k in r))
    return {k: round(statistics.median(r.get(k, 0.0) for r in rows), 1) for k in names}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--kernel-mode", default="auto", help="as `serve --kernel-mode` (the seeds are made under it)")
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--single-seconds", type=float, default=30.0)
    ap.add_argument("--hits", type=int, default=6)
    ap.add_argument("--misses", type=int, default=6)
    ap.add_argument("--reps", type=int, default=3, help="interleaved reps of the hit-vs-in-process comparison")
    ap.add_argument("--no-load", action="store_true", help="skip the load phases (1 and 32 clients)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    from galahad.workers.runtime import pin_process_env

    pin_process_env()
    from galahad.kernels.modes import resolve
    from galahad.workers.runtime import DEFAULT_RUNTIME

    mode = resolve(args.kernel_mode)[0]
    cache = Path(os.environ.get("GALAHAD_MODEL_CACHE", "~/.cache/galahad-models")).expanduser()
    env = serve_env(cache)
    data = Path(tempfile.mkdtemp(prefix="bench-serve-")) / "data"
    hits, misses = pick(args.hits, args.misses)
    t0 = time.perf_counter()
    seed_solutions(data, args.model, cache, [(p.problem, p.answer, p.template, p.topic) for p in hits],
                   DEFAULT_RUNTIME.with_(kernel_mode=mode))
    print(f"seeded {len(hits)} verified solutions in {time.perf_counter() - t0:.0f} s (kernel mode {mode})",
          file=sys.stderr)

    import torch

    from galahad.flywheel.app.storage import engine_for
    from galahad.flywheel.artifacts.store import open_store
    from galahad.flywheel.catalog import Catalog
    from galahad.flywheel.config import Paths
    from galahad.flywheel.memory.solver import Solver

    server = Served(data, ["--model", args.model, "--no-learn", "--kernel-mode", mode], env)
    try:
        t0 = time.perf_counter()
        server.wait_ready(900)
        ready = time.perf_counter() - t0
        catalog = Catalog(f"sqlite:///{data / 'catalog.sqlite3'}")
        solver = Solver(engine_for(args.model, Paths.resolve(data), mode), catalog, open_store(str(data / "store")))
        # warm both sides once per problem, and keep as "hits" only what both answer by recurrence
        recurring, cold_s, cold_stages, decoded_s, decoded_stages, cold_from = [], [], [], [], [], []
        for p in hits:  # each problem's first hit over HTTP: the stored decode (not yet in the replica's memo)
            local = solver.solve(p.problem)
            seen, fresh = {}, {}
            dt, body = post(server.url, p.problem, None, seen)
            dt2, again = post(server.url, p.problem, None, fresh, {"model_decode": True})  # grafted, decoded now
            if local.path == "hash" and local.verified and body["path"] == "hash":
                assert body["answer"] == again["answer"] == local.answer, (body, again, local)
                recurring.append(p)
                cold_s.append(dt)
                cold_stages.append(seen)
                cold_from.append(body["answer_from"])
                decoded_s.append(dt2)
                decoded_stages.append(fresh)
        if not recurring:
            sys.exit("no seeded problem is answered by recurrence: nothing to compare")
        for p in recurring:  # warm the chat route too
            post(server.url, p.problem, args.model)
        for m in misses:  # and the base route (its few-shot prefix is prefilled once per process)
            post(server.url, m.problem)
        http_s, local_s, chat_s, base_s, tokens, base_tokens = [], [], [], [], [], []
        stages: dict[str, list[dict]] = {"solve": [], "chat": [], "base": [], "cold": cold_stages,
                                         "model_decode": decoded_stages}
        for r in range(args.reps):
            for i, p in enumerate(recurring):
                t = time.perf_counter()
                ans = solver.solve(p.problem)
                local_s.append(time.perf_counter() - t)
                assert ans.path == "hash", ans
                for route in ((None, args.model) if r % 2 == 0 else (args.model, None)):
                    seen: dict = {}
                    dt, body = post(server.url, p.problem, route, seen)
                    stages["solve" if route is None else "chat"].append(seen)
                    if route is None:
                        http_s.append(dt)
                        tokens.append(body["decode_tokens"])
                        assert body["path"] == "hash" and ans.answer == body["answer"], (body, ans)
                    else:
                        chat_s.append(dt)
                        assert body["galahad"]["path"] == "hash", body
                        assert body["choices"][0]["message"]["content"] == ans.answer, (body, ans)
                m = misses[(r * len(recurring) + i) % len(misses)]
                seen = {}
                dt, body = post(server.url, m.problem, None, seen)
                if body["path"] in ("base", "computed"):  # the base route answered (computed: then refuted)
                    base_s.append(dt)
                    base_tokens.append(body["decode_tokens"])
                    stages["base"].append(seen)
        texts = [t for pair in zip([p.problem for p in recurring] * len(misses), [m.problem for m in misses] *
                                   len(recurring), strict=True) for t in pair]
        idle = {"skipped": "--no-load", "req_per_s": 0.0, "errors": 0}
        single = idle if args.no_load else load(server.url, texts, 1, args.single_seconds)
        many = idle if args.no_load else load(server.url, texts, args.clients, args.seconds)
    finally:
        server.stop()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    hit, local, base = statistics.median(http_s), statistics.median(local_s), statistics.median(base_s)
    out = {
        "model": args.model, "kernel_mode": mode, "seeded_hits": len(hits), "recurring_hits": len(recurring),
        "misses": len(misses), "serve_ready_s": round(ready, 1), "in_process_torch_threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),  # the caller's, both sides (the server inherits it)
        "hit_http_p50_s": round(hit, 4), "hit_pairs": len(http_s), "hit_decode_tokens_max": max(tokens),
        "hit_in_process_p50_s": round(local, 4),  # Solver.solve in this process, the same problems
        "hit_http_over_in_process": round(hit / local, 3),
        # each problem's first hit on the fresh replica (the stored decode: `answer_from`), and the same hit
        # grafted and decoded now (`model_decode`); later hits are read from the replica's recall memo
        "hit_http_cold_p50_s": round(statistics.median(cold_s), 4), "hit_cold_answer_from": sorted(set(cold_from)),
        "hit_http_model_decode_p50_s": round(statistics.median(decoded_s), 4),
        "base_over_model_decode_hit": round(base / statistics.median(decoded_s), 3),
        "hit_http_cold_over_in_process": round(statistics.median(cold_s) / local, 3),
        "base_over_cold_hit": round(base / statistics.median(cold_s), 3),
        "base_http_p50_s": round(base, 4), "base_answers": len(base_s),
        "base_decode_tokens_median": statistics.median(base_tokens),
        "base_over_hit": round(base / hit, 3),
        "hit_chat_p50_s": round(statistics.median(chat_s), 4),
        "hit_chat_over_solve": round(statistics.median(chat_s) / hit, 3),
        # the replica's stages (Server-Timing, ms) and the client's time outside it, medians per kind of request
        "stages_ms": {k: medians(v) for k, v in stages.items()},
        "single": single, "concurrent": many,
        "concurrent_over_single_req_per_s": None if args.no_load else round(many["req_per_s"] / single["req_per_s"], 3),
        "uptime": uptime,
    }
    print(f"first hit of each problem over HTTP {out['hit_http_cold_p50_s']:.3f} s; hash hit: HTTP {hit:.3f} s vs in-process Solver.solve {local:.3f} s (x{out['hit_http_over_in_process']}); "
          f"base answer {base:.3f} s (x{out['base_over_hit']} a hit); via /v1/chat/completions "
          f"{out['hit_chat_p50_s']:.3f} s (x{out['hit_chat_over_solve']}); stages {out['stages_ms']['solve']}; "
          f"1 client {single['req_per_s']:.2f} req/s, {args.clients} clients {many['req_per_s']:.2f} req/s, "
          f"errors {many['errors']}", file=sys.stderr)
    print(json.dumps(out) if args.json else json.dumps(out, indent=1))
    return 0 if many["errors"] == 0 and single["errors"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
