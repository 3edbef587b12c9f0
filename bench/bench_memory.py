"""Resident memory of `galahad serve` with its learner, by process, after two answers.

Usage: nice -n 10 .venv/bin/python bench/bench_memory.py [--model gemma3-270m] [--kernel-mode auto]
       [--settle 20] [--json]

Set-up: a fresh temp data dir; `galahad serve --model MODEL` with its learner (`tests/serve_harness.Served`,
in its own session, the model cache `$GALAHAD_MODEL_CACHE`, else `~/.cache/galahad-models`; the first use
of a model converts it, about a minute for the default one). Once `/readyz` answers, two problems are asked
over HTTP on 127.0.0.1 (`/v1/solve`, no gold: base answers); then the bench waits until the learner reports
`running` and its actors (`ray::GeneratorActor`, `ray::DepositorActor`) are up, and until the session's
total RSS has held within 1% over `--settle` seconds (sampled every 2 s, at most 5 minutes).

Reported: every live process of the server's session (the driver and the Ray cluster it started, found by
session id: Ray actors are separate processes) with its name (`ray::Class` for an actor, from its command
line), VmRSS (/proc/PID/status) and Pss (/proc/PID/smaps_rollup: shared pages split among their sharers),
in MB, and the 4 mappings that hold most of its Pss (by file, anonymous memory as `[anon]`: which copy of the
weights it holds, private or shared); the totals; `tree_once_mb`, the tree's memory with each file's shared
pages counted once (Pss splits a page with processes outside the tree too, e.g. another server on the same
snapshot); the process count; the CPU model and the load. Then the server is stopped (SIGTERM, wait)
and whatever is left of its session is killed by PID. The last stdout line with --json is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_harness import Served, serve_env  # noqa: E402
from soak import cpu_model  # noqa: E402
from soak_load import session_memory  # noqa: E402

QUESTIONS = ("What is 3 + 4?", "What is 6 * 7?")
ACTORS = ("ray::GeneratorActor", "ray::DepositorActor")


def mappings(pid: int) -> dict[str, list[int]]:
    """A process's mappings by file (anonymous memory as one `[anon]`, the heap as `[heap]`): [Rss, Pss,
    Private_Clean + Private_Dirty, Shared_Clean + Shared_Dirty] in kB, from /proc/PID/smaps."""
    by: dict[str, list[int]] = {}
    what = None
    try:
        lines = Path(f"/proc/{pid}/smaps").read_text().splitlines()
    except OSError:
        return {}
    slot = {"Rss:": 0, "Pss:": 1, "Private_Clean:": 2, "Private_Dirty:": 2, "Shared_Clean:": 3, "Shared_Dirty:": 3}
    for line in lines:
        cols = line.split()
        if "-" in cols[0] and len(cols) >= 5 and ":" in cols[3]:
            what = cols[5] if len(cols) > 5 and not cols[5].startswith("[stack") else "[anon]"
            by.setdefault(what, [0, 0, 0, 0])
        elif what is not None and cols[0] in slot:
            by[what][slot[cols[0]]] += int(cols[1])
    return by


def top_mappings(by: dict[str, list[int]], n: int = 4) -> list[dict]:
    """The `n` mappings that hold the most of a process's Pss: which copy of the weights it holds, private or
    shared."""
    top = sorted(by.items(), key=lambda kv: -kv[1][1])[:n]
    return [{"what": k, "rss_mb": round(v[0] / 1024, 1), "pss_mb": round(v[1] / 1024, 1),
             "private_mb": round(v[2] / 1024, 1), "shared_mb": round(v[3] / 1024, 1)} for k, v in top]


def tree_once(maps: list[dict[str, list[int]]]) -> float:
    """The tree's resident memory with each file's shared pages counted once (MB): every private page, plus
    per file the most any process of the tree maps of it shared (anonymous shared pages count in each
    process). Unlike Pss it does not shrink when a process outside the tree maps the same file."""
    private, shared = 0, {}
    for by in maps:
        for what, (_, _, priv, shr) in by.items():
            private += priv
            if what.startswith("/"):
                shared[what] = max(shared.get(what, 0), shr)
            else:
                private += shr
    return round((private + sum(shared.values())) / 1024, 1)


def measure(server: Served, detail: bool = False) -> dict:
    rss, pss, each = session_memory(server.session())
    rows = sorted(({"pid": int(pid), **p} for pid, p in each.items()), key=lambda r: -r["rss_mb"])
    out = {"rss_mb": round(rss, 1), "pss_mb": round(pss, 1), "processes": len(rows), "by_process": rows}
    if detail:
        maps = [mappings(r["pid"]) for r in rows]
        for r, by in zip(rows, maps, strict=True):
            r["top_mappings"] = top_mappings(by)
        out["tree_once_mb"] = tree_once(maps)
    return out


def settle(server: Served, seconds: float, limit: float = 300.0) -> tuple[dict, float]:
    """Sample every 2 s until the learner runs, its actors are up and total RSS held within 1% for
    `seconds`; the last sample and the seconds waited."""
    t0 = time.monotonic()
    history: list[tuple[float, float]] = []
    while True:
        now = time.monotonic()
        m = measure(server)
        names = {r["name"] for r in m["by_process"]}
        learner = server.json("GET", "/readyz")[1].get("learner", {})
        ready = learner.get("state") == "running" and all(a in names for a in ACTORS)
        history = [*history, (now, m["rss_mb"])] if ready else []
        window = [r for t, r in history if now - t <= seconds]
        if history and now - history[0][0] >= seconds and max(window) - min(window) <= 0.01 * max(window):
            return measure(server, detail=True), now - t0
        if now - t0 > limit:
            raise SystemExit(f"bench_memory: not settled after {limit:.0f} s (learner {learner}, "
                             f"processes {sorted(names)})")
        if server.proc.poll() is not None:
            raise SystemExit(f"bench_memory: serve exited {server.proc.returncode}: {server.tail()[-600:]}")
        time.sleep(2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--kernel-mode", default=None, help="serve --kernel-mode (default: serve's default)")
    ap.add_argument("--settle", type=float, default=20.0, help="seconds total RSS must hold within 1%%")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    cache = Path(os.environ.get("GALAHAD_MODEL_CACHE", "~/.cache/galahad-models")).expanduser()
    data = Path(tempfile.mkdtemp(prefix="bench-memory-")) / "data"
    data.mkdir(parents=True)
    serve_args = ["--model", args.model, *(["--kernel-mode", args.kernel_mode] if args.kernel_mode else [])]
    report: dict = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "model": args.model,
                    "model_cache": str(cache), "serve_args": serve_args, "cpu": cpu_model(),
                    "machine": platform.machine()}
    server = Served(data, serve_args, serve_env(cache))
    try:
        t0 = time.monotonic()
        server.wait_ready(900)
        report["serve_ready_s"] = round(time.monotonic() - t0, 1)
        answers = []
        for q in QUESTIONS:
            status, body = server.json("POST", "/v1/solve", {"problem": q})
            if status != 200:
                raise SystemExit(f"bench_memory: /v1/solve answered {status}: {body}")
            answers.append({"problem": q, "path": body.get("path") or body.get("source"), "answer": body.get("answer")})
        report["answers"] = answers
        m, waited = settle(server, args.settle)
        report.update(m)
        report["settled_after_s"] = round(waited, 1)
        report["load"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        report["serve_exit"] = server.stop()
        left = server.session()
        report["leftover_pids"] = left  # stop() killed them by PID; any listed here survived SIGKILL
        shutil.rmtree(data.parent, ignore_errors=True)
    if not args.json:
        for r in report["by_process"]:
            print(f"{r['pid']:>8} {r['name']:<28} rss {r['rss_mb']:8.1f} MB  pss {r['pss_mb']:8.1f} MB", file=sys.stderr)
        print(f"total rss {report['rss_mb']} MB, pss {report['pss_mb']} MB, each page once {report['tree_once_mb']} MB, "
              f"{report['processes']} processes",
              file=sys.stderr)
    print(json.dumps(report) if args.json else json.dumps(report, indent=1))
    return 0 if report["serve_exit"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
