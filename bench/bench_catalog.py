"""Catalog benchmark: exact-match lookups at 10^4..10^6 rows on SQLite, and deposit throughput.

    python bench/bench_catalog.py                 # sizes 1e4 1e5 1e6, SQLite in a temp dir
    python bench/bench_catalog.py --sizes 10000 --url postgresql://postgres@127.0.0.1:5432/bench
    python bench/bench_catalog.py --rows 1000000 --json     # a catalog of a million: lookups and routing

`--rows N` builds N verified problems with recall rows, keys and shapes on SQLite and on PostgreSQL
(`--pg`: a database of its own is created on that server and dropped after) and times lookups and the
solver's routing with no model (`bench/catalog_million.py`); its last line is JSON
{"rows", "lookup_p99_ms", "route_p99_ms", ...}: the worst p99 over both backends.

Lookups go through the public API (`catalog.problems.by_hash`, `catalog.artifacts.get`: connection checkout,
query, row -> dict), each timed alone; the table is grown in place between sizes with bulk Core inserts
(not the ORM). Deposit throughput uses real artifacts and a real store on disk: `deposit` (one blob fsync
+ one commit per artifact) and `deposit_many` (batches of 100: puts on 16 threads, one commit), then
both again with the store on tmpfs. Figures and how to read them: bench/README.md.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import insert

from galahad.flywheel.artifacts.store import LocalStore
from galahad.flywheel.catalog import Catalog, now, problem_hash
from galahad.flywheel.catalog.schema import TABLES

BATCH = 20_000


def _fp(tag: str) -> str:
    return hashlib.sha256(tag.encode()).hexdigest()


def grow(cat: Catalog, start: int, stop: int) -> float:
    """Insert problems and artifacts [start, stop); returns rows/s (both tables counted)."""
    t0, ts = time.perf_counter(), now()
    model, runtime = _fp("model"), _fp("runtime")
    for lo in range(start, stop, BATCH):
        hi = min(stop, lo + BATCH)
        problems = [dict(id=problem_hash(f"problem number {i}"), text=f"problem number {i}", answer=str(i),
                         source="bench", topic=f"topic{i % 50}", template=f"tpl{i % 500}", external_id=None,
                         status="pending", claimed_by=None, lease_until=None, claims=0, created_at=ts,
                         updated_at=ts) for i in range(lo, hi)]
        artifacts = [dict(id=_fp(f"artifact {i}"), parent_id=None, verification_id=None, token_start=0,
                          token_end=16, n_tokens=16, size=40_000, model_fingerprint=model,
                          runtime_fingerprint=runtime, dtype="float32", layer_kinds=["full"] * 18,
                          token_ids=list(range(i % 1000, i % 1000 + 16)), location="file:///bench",
                          created_at=ts) for i in range(lo, hi)]
        with cat.write() as conn:
            conn.execute(insert(TABLES["problems"]), problems)
            conn.execute(insert(TABLES["artifacts"]), artifacts)
    return 2 * (stop - start) / (time.perf_counter() - t0)


def timed(fn, keys: list[str]) -> dict[str, float]:
    """p50/p99 in ms of fn(key) over keys (after a warm-up over the first 200): wall clock, and this
    thread's CPU time, which leaves out waiting for a core on a shared machine."""
    for k in keys[:200]:
        fn(k)
    wall, cpu = [], []
    for k in keys:
        t, c = time.perf_counter_ns(), time.thread_time_ns()
        fn(k)
        cpu.append((time.thread_time_ns() - c) / 1e6)
        wall.append((time.perf_counter_ns() - t) / 1e6)
    qw = statistics.quantiles(wall, n=100, method="inclusive")
    qc = statistics.quantiles(cpu, n=100, method="inclusive")
    return {"p50": qw[49], "p99": qw[98], "cpu_p50": qc[49], "cpu_p99": qc[98]}


def lookups(cat: Catalog, n_rows: int, samples: int, rng: random.Random) -> dict[str, dict[str, float]]:
    idx = [rng.randrange(n_rows) for _ in range(samples)]
    probs = [problem_hash(f"problem number {i}") for i in idx]
    arts = [_fp(f"artifact {i}") for i in idx]
    assert cat.problems.by_hash(probs[0]) is not None and cat.artifacts.get(arts[0])["id"] == arts[0]
    return {"problem by hash": timed(cat.problems.by_hash, probs), "artifact by id": timed(cat.artifacts.get, arts)}


def deposits(url: str, root: Path, n: int, label: str) -> dict[str, float]:
    import torch

    from galahad.flywheel.artifacts.format import ArtifactMeta, encode

    blobs = []
    for i in range(2 * n):  # 18 layers x 1 head x 16 tokens x 8: a small but real artifact (~19 KB)
        meta = ArtifactMeta(token_ids=tuple(range(i, i + 16)), start=0, parent=None,
                            model_fingerprint=_fp("model"), runtime_fingerprint=_fp("runtime"),
                            layer_kinds=("full",) * 18, dtype="float32", extra={"i": i})
        kv = [torch.full((1, 1, 16, 8), float(i))] * 18
        blobs.append(encode(meta, kv, kv)[1])
    out = {}
    with Catalog(url) as cat:
        store = LocalStore(root / "store")
        t = time.perf_counter()
        for b in blobs[:n]:
            cat.artifacts.deposit(store, store.put(b))
        out[f"deposit, 1 per commit, store {label}"] = n / (time.perf_counter() - t)
        t = time.perf_counter()
        for lo in range(n, 2 * n, 100):
            cat.artifacts.deposit_many(store, store.put_many(blobs[lo : lo + 100]))
        out[f"deposit_many, 100 per commit, store {label}"] = n / (time.perf_counter() - t)
        assert cat.stats()["artifacts"] == 2 * n
    return out


def scale(args) -> int:
    """`--rows N`: a catalog of N problems with recalls, keys and shapes, per backend; JSON last line."""
    import uuid

    import catalog_million as cm
    from sqlalchemy import create_engine, make_url

    rng = random.Random(0)
    cm.check_closed_form(args.rows, rng)
    out: dict = {"rows": args.rows, "load_avg_start": os.getloadavg(), "backends": {}}
    for backend in args.backends.split(","):
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            admin, name = None, None
            if backend == "sqlite":
                url = f"sqlite:///{Path(tmp) / 'scale.sqlite3'}"
            elif backend == "postgresql":
                admin = create_engine(args.pg, isolation_level="AUTOCOMMIT")
                name = f"galahad_bench_{uuid.uuid4().hex[:12]}"
                with admin.connect() as conn:
                    conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
                url = make_url(args.pg).set(database=name).render_as_string(hide_password=False)
            else:
                raise SystemExit(f"bench_catalog: error: unknown backend {backend!r} (sqlite, postgresql)")
            try:
                with Catalog(url) as cat:
                    build_s = cm.build(cat, args.rows)
                    print(f"{backend}: built {args.rows:,} problems (7 rows each) in {build_s:.1f} s", file=sys.stderr,
                          flush=True)
                    res = {"build_s": round(build_s, 1), **cm.measure(cat, args.rows, args.samples, rng)}
                out["backends"][backend] = res
                for part in ("lookups", "routes", "every_route"):
                    for kind, q in res[part].items():
                        print(f"  {backend} {part} {kind}: p50 {q['p50']:.3f} ms  p99 {q['p99']:.3f} ms  "
                              f"(CPU p99 {q['cpu_p99']:.3f} ms)", file=sys.stderr)
            finally:
                if admin is not None:
                    with admin.connect() as conn:
                        conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
                    admin.dispose()
    out["load_avg_end"] = os.getloadavg()
    out["lookup_p99_ms"] = max(b["lookup_p99_ms"] for b in out["backends"].values())
    out["route_p99_ms"] = max(b["route_p99_ms"] for b in out["backends"].values())
    if args.json not in (None, "-"):
        Path(args.json).write_text(json.dumps(out, indent=2))
    head = {k: out[k] for k in ("rows", "lookup_p99_ms", "route_p99_ms")}
    print(json.dumps({**head, **{k: v for k, v in out.items() if k not in head}}))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=None, help="build a catalog of N verified problems with recall "
                    "rows, keys and shapes; time lookups and routing (last line: JSON)")
    ap.add_argument("--backends", default="sqlite,postgresql", help="with --rows: comma-separated")
    ap.add_argument("--pg", default="postgresql+psycopg://postgres@127.0.0.1:5432/test",
                    help="with --rows: a PostgreSQL server (a database of its own is created there and dropped)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    ap.add_argument("--samples", type=int, default=5_000, help="timed lookups per size and kind")
    ap.add_argument("--deposits", type=int, default=1_000)
    ap.add_argument("--dir", default=None, help="work dir (default: a temp dir, removed after)")
    ap.add_argument("--url", default=None, help="catalog URL for the lookup part (default: SQLite in --dir)")
    ap.add_argument("--json", nargs="?", const="-", default=None,
                    help="also write the figures here (with --rows, bare --json: the JSON last line only)")
    args = ap.parse_args(argv)
    if args.rows is not None:
        if args.rows < 1000:
            ap.error("--rows must be at least 1000")
        return scale(args)
    tmp = tempfile.TemporaryDirectory(dir=args.dir)
    root = Path(tmp.name)
    url = args.url or f"sqlite:///{root / 'bench.sqlite3'}"
    rng = random.Random(0)
    results: dict = {"url": url.split("@")[-1], "load_avg": os.getloadavg(), "lookups": {}, "grow_rows_per_s": {}}
    print(f"catalog {results['url']}  (load average at start {results['load_avg'][0]:.1f})", flush=True)
    with Catalog(url) as cat:
        have = 0
        for size in sorted(args.sizes):
            results["grow_rows_per_s"][size] = grow(cat, have, size)
            have = size
            results["lookups"][size] = lookups(cat, size, args.samples, rng)
            print(f"  {size:>9,} rows: bulk insert {results['grow_rows_per_s'][size]:,.0f} rows/s; "
                  + "; ".join(f"{k} p50 {v['p50']:.3f} ms p99 {v['p99']:.3f} ms"
                              for k, v in results["lookups"][size].items()),
                  flush=True)
    results["deposit_rows_per_s"] = deposits(f"sqlite:///{root / 'deposit.sqlite3'}", root, args.deposits, "on disk")
    if Path("/dev/shm").is_dir():  # same code, no device flush: separates the catalog's cost from fsync latency
        with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
            results["deposit_rows_per_s"].update(
                deposits(f"sqlite:///{root / 'deposit-shm.sqlite3'}", Path(shm), args.deposits, "on tmpfs"))
    print("\n| rows | lookup | wall p50 (ms) | wall p99 (ms) | CPU p50 (ms) | CPU p99 (ms) |")
    print("|---:|---|---:|---:|---:|---:|")
    for size, v in results["lookups"].items():
        for kind, q in v.items():
            print(f"| {size:,} | {kind} | {q['p50']:.3f} | {q['p99']:.3f} | {q['cpu_p50']:.3f} | {q['cpu_p99']:.3f} |")
    print("\n| deposit (SQLite catalog on disk, WAL) | rows/s |\n|---|---:|")
    for k, v in results["deposit_rows_per_s"].items():
        print(f"| {k} | {v:,.0f} |")
    if args.json not in (None, "-"):
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
