"""A catalog of N verified problems with recall rows, keys and shapes, built in bulk; lookups and routing timed.

What `bench_catalog.py --rows N` runs, once per backend (SQLite in a temp dir; PostgreSQL in a database of
its own, created and dropped). Half the problems are keyed additions sharing one template shape ("What is
a + b?", 5 templates, a few libraries); half are GSM8K-like, every one its own template and shape and no
key. Every problem is verified, with an attempt, a positive verdict, a recall artifact row, its key row
and its shape row: 7 rows a problem, inserted in batches (SQLite: Core executemany; PostgreSQL: COPY).
Keys and numbers are written from a closed form checked against `problems/canonical.py` on a sample (the
reader takes ~0.3 ms a text, minutes at 10^6); shapes are computed by `problems/shapes.py` itself.

Timed: lookups through the public API (problem by hash, artifact by id, recall by hash, recall by key) and
`route`: `list(Solver.routes(text))`, every candidate route the solver would walk (hash -> key ->
similar -> transfer -> base), with no model (no route is answered), over texts that hit by hash, by key,
by shape only (transfer lookup) and not at all. Transfer answers only where a gate is open (`catalog.gates`):
an unseen keyed text is routed twice, first with no gate evidence (closed: base, after the gate lookup), then
after the bench records open transfer gates for its libraries, as `eval transfer` would where the route paid
(transfer: the gate lookup and the chain).
"""

from __future__ import annotations

import hashlib
import json
import random
import statistics
import time
from datetime import timedelta
from typing import Any

from sqlalchemy import insert, text

from galahad.flywheel.catalog import Catalog, now, problem_hash
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.memory.solver import Solver
from galahad.flywheel.problems import canonical
from galahad.flywheel.problems.shapes import shape_hash

BATCH = 20_000
MODEL, RUNTIME = (hashlib.sha256(t.encode()).hexdigest() for t in ("bench model", "bench runtime"))
ORDER = ("problems", "problem_keys", "problem_shapes", "attempts", "verifications", "artifacts", "recalls")


class NoModel:
    """Routing reads only the engine's fingerprints (which artifacts may graft); nothing is answered."""

    model_fingerprint, runtime_fingerprint = MODEL, RUNTIME


def _h(tag: str, n: int = 64) -> str:
    return hashlib.sha256(tag.encode()).hexdigest()[:n]


def _letters(j: int) -> str:
    out = ""
    while True:
        out, j = chr(97 + j % 26) + out, j // 26
        if not j:
            return out


def problem(i: int) -> dict[str, Any]:
    """Problem i: text, answer, template, topic, canonical key and numbers (closed form)."""
    j = i // 2
    if i % 2 == 0:
        a, b = j // 1000, j % 1000 + 1000
        return dict(text=f"What is {a} + {b}?", answer=str(a + b), template=f"add/t{j % 5}", topic="addition",
                    key=f"e:+({','.join(sorted((str(a), str(b))))})", numbers=f"{a},{b}")
    a, b = j % 1000, j // 1000 + 2
    lo, hi = sorted((a, b))
    return dict(text=f"Person{_letters(j)} has {a} coins and finds {b} more. How many coins now?",
                answer=str(a + b), template=f"gsm/{j}", topic="word", key=None, numbers=f"{lo},{hi}")


def check_closed_form(n: int, rng: random.Random, samples: int = 300) -> None:
    for i in [rng.randrange(n) for _ in range(samples)]:
        p = problem(i)
        assert canonical.canonical_key(p["text"]) == p["key"], (p, canonical.canonical_key(p["text"]))
        assert canonical.numbers(p["text"]) == p["numbers"], (p, canonical.numbers(p["text"]))


_DEFAULTS = {t: {c.name: (c.default.arg if c.default is not None and c.default.is_scalar else None)
                  for c in TABLES[t].c} for t in ORDER}


def _fill(table: str, row: dict[str, Any]) -> dict[str, Any]:
    """Every column of `table` (whatever later migrations add): given, else its scalar default, else None."""
    return {**_DEFAULTS[table], **row}


def batch_rows(lo: int, hi: int, run_id: str, t0) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {t: [] for t in ORDER}
    for i in range(lo, hi):
        p, ts = problem(i), t0 + timedelta(microseconds=i)
        pid, att, ver, art = problem_hash(p["text"]), _h(f"a{i}", 32), _h(f"v{i}", 32), _h(f"artifact {i}")
        out["problems"].append(_fill("problems", dict(
            id=pid, text=p["text"], answer=p["answer"], source="bench", topic=p["topic"], template=p["template"],
            gold_source="computed", status="verified", claims=1, created_at=ts, updated_at=ts)))
        out["problem_keys"].append(_fill("problem_keys", dict(
            problem_id=pid, key_version=canonical.KEY_VERSION, canonical_key=p["key"], numbers=p["numbers"])))
        out["problem_shapes"].append(_fill("problem_shapes", dict(
            problem_id=pid, shape_hash=shape_hash(p["text"]), created_at=ts)))
        out["attempts"].append(_fill("attempts", dict(
            id=att, problem_id=pid, run_id=run_id, model_fingerprint=MODEL, sampling={"temperature": 0.7},
            output_text=f" {p['answer']}", tokens=3, seconds=0.1, cpu_seconds=0.1, created_at=ts)))
        out["verifications"].append(_fill("verifications", dict(
            id=ver, attempt_id=att, verifier_version="bench", verified=True, reason="equal", created_at=ts)))
        out["artifacts"].append(_fill("artifacts", dict(
            id=art, token_start=0, token_end=24, n_tokens=24, size=888_000, model_fingerprint=MODEL,
            runtime_fingerprint=RUNTIME, dtype="float32", layer_kinds=["sliding"] * 5 + ["full"],
            token_ids=list(range(i % 1000, i % 1000 + 24)), verification_id=ver, location="file:///bench",
            created_at=ts, rebuilds=0)))
        out["recalls"].append(_fill("recalls", dict(problem_id=pid, artifact_id=art, verification_id=ver,
                                                    created_at=ts)))
    return out


def _sqlite_converter(column):
    """What SQLAlchemy's SQLite types store: datetimes as ISO text with microseconds, JSON as its text."""
    kind = column.type.__class__.__name__
    if kind == "DateTime":
        return lambda v: None if v is None else v.isoformat(sep=" ", timespec="microseconds")
    if kind == "JSON":
        return lambda v: None if v is None else json.dumps(v)
    return None


def _executemany(conn, table: str, batch: list[dict[str, Any]]) -> None:
    """SQLite: the driver's executemany over tuples (SQLAlchemy's per-row processing is most of the cost)."""
    cols = [c.name for c in TABLES[table].c]
    conv = [(c.name, _sqlite_converter(c)) for c in TABLES[table].c]
    sql = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    data = [tuple(r[c] if f is None else f(r[c]) for c, f in conv) for r in batch]
    conn.connection.driver_connection.executemany(sql, data)


def _copy(conn, table: str, batch: list[dict[str, Any]]) -> None:
    """PostgreSQL COPY through the raw psycopg connection (JSON columns as their text)."""
    cols = [c.name for c in TABLES[table].c]
    json_cols = {c.name for c in TABLES[table].c if c.type.__class__.__name__ == "JSON"}
    raw = conn.connection.driver_connection
    with raw.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as cp:
        for r in batch:
            cp.write_row([json.dumps(r[c]) if c in json_cols and r[c] is not None else r[c] for c in cols])


def build(cat: Catalog, n: int) -> float:
    """Insert n problems with everything a verified, recalled problem has; returns seconds."""
    t_start, t0 = time.perf_counter(), now()
    run_id = _h("bench run", 32)
    with cat.write() as conn:
        conn.execute(insert(TABLES["runs"]), [dict(id=run_id, config={"bench": True}, summary=None,
                                                  started_at=t0, finished_at=None)])
    for lo in range(0, n, BATCH):
        tables = batch_rows(lo, min(n, lo + BATCH), run_id, t0)
        with cat.write() as conn:
            if cat.dialect == "sqlite":  # a bigger page cache for the build's connections only (dropped below)
                conn.exec_driver_sql("PRAGMA cache_size = -262144")
            for t in ORDER:
                (_copy if cat.dialect == "postgresql" else _executemany)(conn, t, tables[t])
    cat.engine.dispose()  # the lookups run on fresh connections, with the default page cache
    libraries(cat, t0)
    if cat.dialect == "postgresql":  # as autovacuum leaves a table: visibility map and hint bits set, statistics
        with cat.reader.connect() as conn:  # (VACUUM cannot run in a transaction: the autocommit reader)
            conn.execute(text("VACUUM ANALYZE"))
    else:
        with cat.engine.connect() as conn:  # planner statistics, as a maintained database has them
            conn.execute(text("ANALYZE"))
            conn.commit()
    return time.perf_counter() - t_start


def libraries(cat: Catalog, t0) -> None:
    """One library per keyed template, a chain of 8 of its solutions' artifacts (transfer has something)."""
    libs, entries = [], []
    for k in range(5):
        libs.append(dict(name=f"template:add/t{k}", topic="addition", template=f"add/t{k}", created_at=t0))
        for pos in range(8):
            i = 2 * (k + 5 * pos)  # keyed problem j = k + 5 pos: template add/t{k}
            entries.append(dict(library=f"template:add/t{k}", chain_index=0, position=pos,
                                artifact_id=_h(f"artifact {i}"), added_at=t0))
    with cat.write() as conn:
        conn.execute(insert(TABLES["libraries"]), libs)
        conn.execute(insert(TABLES["library_entries"]), entries)


def open_gates(cat: Catalog) -> None:
    """Open the transfer gate of every bench library for the bench model (the rows `eval transfer` records
    where the route beat the base model; the counts here are placeholders, never read by routing)."""
    cat.gates.record([dict(model_fingerprint=MODEL, library=f"template:add/t{k}", route="transfer", open=True,
                           manifest_id=_h("bench gates"), condition="transfer", route_correct=8, route_n=8,
                           base_correct=0, base_n=8) for k in range(5)])


def timed(fn, args: list) -> dict[str, float]:
    """Wall p50/p99/max in ms of fn(a) over args (after a warm-up), and this thread's CPU p99 (which leaves out
    waiting for a core on a shared machine)."""
    for a in args[:50]:
        fn(a)
    wall, cpu = [], []
    for a in args:
        t, c = time.perf_counter_ns(), time.thread_time_ns()
        fn(a)
        cpu.append((time.thread_time_ns() - c) / 1e6)
        wall.append((time.perf_counter_ns() - t) / 1e6)
    q, qc = (statistics.quantiles(x, n=100, method="inclusive") for x in (wall, cpu))
    return {"p50": round(q[49], 3), "p99": round(q[98], 3), "max": round(max(wall), 3), "cpu_p99": round(qc[98], 3)}


def route_texts(n: int, rng: random.Random, k: int) -> dict[str, list[str]]:
    keyed = [2 * rng.randrange(n // 2) for _ in range(k)]
    gsm = [2 * rng.randrange(n // 2) + 1 for _ in range(k)]
    para = []
    for i in keyed:
        j = i // 2
        para.append(f"What is the sum of {j % 1000 + 1000} and {j // 1000}?")  # same key, other words
    return {
        "hash (keyed)": [problem(i)["text"] for i in keyed],
        "hash (own template)": [problem(i)["text"] for i in gsm],
        "key (paraphrase)": para,
        "shape only (transfer lookup)": [f"Person{_letters(i // 2)} has 7777 coins and finds 8888 more. How many "
                                         "coins now?" for i in gsm],
        "keyed, unseen (gate closed)": [f"What is {5000 + i} + 7?" for i in range(k)],
        "keyed, unseen (gate open: transfer)": [f"What is {6000 + i} + 7?" for i in range(k)],
        "nothing": [f"Nobody{_letters(i)} counts {i} stars twice. How many stars?" for i in range(k)],
    }


def measure(cat: Catalog, n: int, samples: int, rng: random.Random) -> dict[str, Any]:
    idx = [rng.randrange(n) for _ in range(samples)]
    fps = (MODEL, RUNTIME)
    probs = [problem_hash(problem(i)["text"]) for i in idx]
    keys = [problem(i)["key"] for i in idx if problem(i)["key"]]
    arts = [_h(f"artifact {i}") for i in idx]
    assert cat.recalls.get(probs[0], fps) is not None and cat.artifacts.get(arts[0])["id"] == arts[0]
    assert cat.recalls.by_key(keys[0], fps)
    lookups = {"problem by hash": timed(cat.problems.by_hash, probs),
               "artifact by id": timed(cat.artifacts.get, arts),
               "recall by hash": timed(lambda h: cat.recalls.get(h, fps), probs),
               "recall by key": timed(lambda k: cat.recalls.by_key(k, fps), keys)}
    solver = Solver(NoModel(), cat, None)
    t = time.perf_counter()
    solver._keys()  # what a process's first solve does once: key and shape rows written without them
    setup_s = time.perf_counter() - t
    texts = route_texts(n, rng, max(50, samples // 6))
    expect = {"hash (keyed)": "hash", "hash (own template)": "hash", "key (paraphrase)": "key",
              "shape only (transfer lookup)": "base", "keyed, unseen (gate closed)": "base",
              "keyed, unseen (gate open: transfer)": "transfer", "nothing": "base"}
    # route: what `solve` spends before its first forward (the first route it would answer); every route: the
    # whole list, every matcher run (what a recall that fails to verify falls through to). The closed-gate kind
    # is timed before the gates are recorded, every other kind after.
    routes, every = {}, {}
    for kind, ts in sorted(texts.items(), key=lambda kv: kv[0] != "keyed, unseen (gate closed)"):
        if kind != "keyed, unseen (gate closed)" and not cat.gates.all():
            open_gates(cat)
        got = [r.path for r in solver.routes(ts[0])]  # each kind takes the route it is meant to
        if got[0] != expect[kind]:
            raise SystemExit(f"catalog_million: {kind!r} routed {got}, expected {expect[kind]!r} first")
        routes[kind] = timed(lambda s: next(iter(solver.routes(s))), ts)
        every[kind] = timed(lambda s: list(solver.routes(s)), ts)
    return {"lookups": lookups, "routes": routes, "every_route": every, "first_solve_setup_s": round(setup_s, 3),
            "lookup_p99_ms": max(v["p99"] for v in lookups.values()),
            "route_p99_ms": max(v["p99"] for v in routes.values()),
            "every_route_p99_ms": max(v["p99"] for v in every.values()),
            "route_cpu_p99_ms": max(v["cpu_p99"] for v in routes.values()),
            "lookup_cpu_p99_ms": max(v["cpu_p99"] for v in lookups.values())}
