"""Soak: `galahad serve` with its learner over a stream for `--minutes`, sampled every `--interval` seconds.

Usage: nice -n 10 .venv/bin/python bench/soak.py [--minutes 60] [--interval 60] [--clients 4] [--model gemma3-270m]
       [--feed-per-min 6] [--think 1.0] [--k 4] [--max-tokens 12] [--ram-tier SIZE] [--out reports/soak-MODEL.json]
       [--keep-data] [--json]

Set-up: a fresh temp data dir; `galahad serve` with its learner (`--k`, `--max-tokens`: the learner's budget,
small for a 2-core machine; `--ram-tier`: each grafting process's RAM tier, default the serve default)
through `tests/serve_harness.Served`, in its own session. Load (`soak_load.py`):
a feeder POSTs one problem at a time to /v1/problems (`--feed-per-min`; the built-in families, GSM8K train
and reasoning-gym basic_arithmetic / chain_sum / simple_equations, interleaved, with the sources' golds),
and `--clients` threads POST /v1/solve with golds (60% recurring problems already submitted, else new
problems of their own, which the service queues for the learner; every 8th request through
/v1/chat/completions), each pausing `--think` s between requests.

Per interval (one line on stderr, one row in the report, written as it comes: a killed run keeps its rows):
RSS and PSS of the server's whole session (driver + every Ray process: sum over /proc/PID of VmRSS, Pss),
its process count, each process's VmRSS and Pss by PID and name (`ray::Class` for an actor), the store's bytes on disk (data/store, apparent sizes), the catalog's bytes and rows
(`GET /v1/catalog/stats`: problems, attempts, verifications, artifacts, libraries, runs), verified and
verified/h over the interval, answer requests (/v1/solve and /v1/chat/completions) and their client-side
p50/p99 latency, busy answers (503 on /v1/solve, 429 on the chat route: documented back-pressure, counted
apart), errors (every other non-2xx, and requests that got no HTTP answer), the learner's state and
restarts (`/readyz`), the answering replica's RAM tier (`/metrics`: bytes held, its capacity, hits,
misses), and os.getloadavg().

At the end: the report JSON (`--out`, default reports/soak-MODEL.json), a PNG beside it (RSS, store, verified/h,
p99 latency vs minutes), and the RSS slope: least squares, MB per hour, over the intervals after the first
10 minutes (the first third when the run is shorter than 30 minutes), overall and per process
(`process_slopes`, largest first: which process holds the growth). The last stdout line with --json is
the summary; its errors and busy include the requests that ended after the last sample (drained at the
end, or failed when the server died: `after_last_interval`). Exit 1 when the server died or any request erred.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import soak_load as load  # noqa: E402
from serve_harness import Served, serve_env  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
ROW_TABLES = ("problems", "attempts", "verifications", "artifacts", "libraries", "runs")


def quantile(values: list[float], p: float) -> float | None:
    s = sorted(values)
    return round(s[min(len(s) - 1, int(p * len(s)))], 3) if s else None


def slope_per_h(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (minutes, MB) points, in MB per hour; None with fewer than 2 points."""
    if len(points) < 2 or len({x for x, _ in points}) < 2:
        return None
    mx, my = statistics.fmean(x for x, _ in points), statistics.fmean(y for _, y in points)
    num = sum((x - mx) * (y - my) for x, y in points)
    den = sum((x - mx) ** 2 for x, _ in points)
    return round(60.0 * num / den, 2)


def cpu_model() -> str:
    info = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            k, _, v = line.partition(":")
            info.setdefault(k.strip(), v.strip())
    return (f"{info.get('model name', '?')} (vendor {info.get('vendor_id', '?')}, family {info.get('cpu family', '?')}, "
            f"model {info.get('model', '?')}), {os.cpu_count()} CPUs")


def write_json(path: Path, obj: dict) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    tmp.replace(path)


def sample(server: Served, data: Path, t_start: float, t_prev: float, prev_verified: int, tally: load.Tally) -> dict:
    """One interval's row (see the module docstring)."""
    now = time.monotonic()
    rows = tally.take()
    answers = [r for r in rows if r[0] in load.ANSWER_ENDPOINTS]
    ok = [r[2] for r in answers if 200 <= r[1] < 300]
    rss, pss, each = load.session_memory(server.session())
    status, stats = 0, {}
    with contextlib.suppress(Exception):
        status, stats = server.json("GET", "/v1/catalog/stats")
    learner = {}
    with contextlib.suppress(Exception):
        learner = server.json("GET", "/readyz")[1].get("learner", {})
    tier: dict[str, float] = {}
    with contextlib.suppress(Exception):
        tier = {name.removeprefix("galahad_ram_tier_"): value for name, value in server.metrics().items()
                if name.startswith("galahad_ram_tier_")}
    verified = int(stats.get("verified", prev_verified)) if status == 200 else prev_verified
    dt_h = (now - t_prev) / 3600
    paths: dict[str, int] = {}
    for r in answers:
        if r[3]:
            paths[r[3]] = paths.get(r[3], 0) + 1
    return {
        "minute": round((now - t_start) / 60, 2), "seconds": round(now - t_prev, 1),
        "rss_mb": round(rss, 1), "pss_mb": round(pss, 1), "processes": len(server.session()),
        "store_mb": round(load.tree_bytes(data / "store") / 1e6, 2),
        "catalog_db_mb": round(sum(f.stat().st_size for f in data.glob("catalog.sqlite3*")) / 1e6, 2),
        "catalog_rows": sum(int(stats.get(t, 0)) for t in ROW_TABLES) if status == 200 else None,
        "problems": stats.get("problems"), "artifacts": stats.get("artifacts"), "by_status": stats.get("by_status"),
        "verified": verified, "verified_delta": verified - prev_verified,
        "verified_per_h": round((verified - prev_verified) / dt_h, 1) if dt_h > 0 else None,
        "answers": len(answers), "answers_ok": len(ok), "answer_paths": paths,
        "p50_s": quantile(ok, 0.5), "p99_s": quantile(ok, 0.99),
        "submits": len(submits := [r[2] for r in rows if r[0] == "/v1/problems"]),
        "submit_p50_s": quantile(submits, 0.5), "submit_max_s": quantile(submits, 1.0),
        "busy": sum(1 for r in rows if load.is_busy(r[0], r[1])),
        "errors": sum(1 for r in rows if load.is_error(r[0], r[1])),
        "errors_by_status": {str(s): n for s in sorted({r[1] for r in rows if load.is_error(r[0], r[1])})
                             if (n := sum(1 for r in rows if r[1] == s and load.is_error(r[0], r[1])))},
        "learner_state": learner.get("state"), "learner_restarts": learner.get("restarts"),
        "ram_tier_mb": round(tier["bytes"] / 1e6, 2) if "bytes" in tier else None,
        "ram_tier_capacity_mb": round(tier["capacity_bytes"] / 1e6, 2) if "capacity_bytes" in tier else None,
        "ram_tier_hits": tier.get("hits_total"), "ram_tier_misses": tier.get("misses_total"),
        "load": [round(x, 2) for x in os.getloadavg()],
        "by_process": each,
    }


def process_slopes(rows: list[dict]) -> list[dict]:
    """Per process (PID and name) over `rows`: first and last RSS, and its least-squares RSS slope (MB/h),
    largest slope first: which process holds the session's growth."""
    seen: dict[str, dict] = {}
    for r in rows:
        for pid, p in (r.get("by_process") or {}).items():
            seen.setdefault(pid, {"pid": int(pid), "name": p["name"], "points": []})["points"].append(
                (r["minute"], p["rss_mb"]))
    out = []
    for s in seen.values():
        pts = s.pop("points")
        out.append({**s, "samples": len(pts), "from_minute": pts[0][0], "to_minute": pts[-1][0],
                    "rss_mb_first": pts[0][1], "rss_mb_last": pts[-1][1],
                    "rss_slope_mb_per_h": slope_per_h(pts) if len(pts) >= 2 else None})
    return sorted(out, key=lambda s: -(s["rss_slope_mb_per_h"] or 0.0))


def plot(report: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["intervals"]
    x = [r["minute"] for r in rows]
    fig, axes = plt.subplots(6, 1, figsize=(8, 14), sharex=True)
    series = (("rss_mb", "session RSS (MB)"), ("store_mb", "store (MB)"), ("ram_tier_mb", "replica RAM tier (MB)"),
              ("verified_per_h", "verified / h"), ("p99_s", "answer p99 (s)"))
    for ax, (key, label) in zip(axes[:-1], series, strict=True):
        ax.plot(x, [r[key] if r.get(key) is not None else float("nan") for r in rows], marker=".")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].plot(x, [r["pss_mb"] for r in rows], marker=".", alpha=0.6, label="PSS")
    axes[0].legend(["RSS (sum VmRSS)", "PSS"], fontsize=8)
    procs = {}  # the six largest processes at the end, each its own line
    for pid, p in sorted((rows[-1].get("by_process") or {}).items(), key=lambda kv: -kv[1]["rss_mb"])[:6]:
        procs[pid] = f"{p['name']} ({pid})"
    for pid, label in procs.items():
        axes[-1].plot(x, [r.get("by_process", {}).get(pid, {}).get("rss_mb", float("nan")) for r in rows],
                      marker=".", label=label)
    axes[-1].set_ylabel("RSS per process (MB)")
    axes[-1].grid(alpha=0.3)
    if procs:
        axes[-1].legend(fontsize=7)
    axes[-1].set_xlabel("minutes")
    fig.suptitle(f"galahad serve soak, {report['model']}: RSS slope {report['rss_slope_mb_per_h']} MB/h "
                 f"(after minute {report['slope_after_minute']})", fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--interval", type=float, default=60.0, help="seconds between samples")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--feed-per-min", type=float, default=6.0, help="problems the feeder submits a minute")
    ap.add_argument("--think", type=float, default=1.0, help="seconds each client waits between requests")
    ap.add_argument("--k", type=int, default=4, help="learner: samples per problem")
    ap.add_argument("--max-tokens", type=int, default=12, help="learner: tokens per sample")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ram-tier", default=None, metavar="SIZE", help="serve --ram-tier (default: serve's default)")
    ap.add_argument("--out", type=Path, default=None, help="report path (default reports/soak-MODEL.json)")
    ap.add_argument("--keep-data", action="store_true", help="keep the temp data dir and serve log (else removed)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.minutes <= 0 or args.interval <= 0 or args.clients < 0 or args.feed_per_min <= 0:
        ap.error("--minutes, --interval and --feed-per-min must be > 0, --clients >= 0")

    from galahad.workers.runtime import pin_process_env

    pin_process_env()
    cache = Path(os.environ.get("GALAHAD_MODEL_CACHE", "~/.cache/galahad-models")).expanduser()
    env = serve_env(cache)
    out = args.out or ROOT / "reports" / f"soak-{Path(args.model).name}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="soak-")) / "data"
    data.mkdir(parents=True)
    n_each = int(args.minutes * args.feed_per_min / 5) + 20
    feed, new, skipped = load.stream(n_each, args.seed)
    serve_args = ["--model", args.model, "--k", str(args.k), "--max-tokens", str(args.max_tokens),
                  "--seed", str(args.seed), *(["--ram-tier", args.ram_tier] if args.ram_tier else [])]
    report = {"model": args.model, "command": " ".join([Path(sys.executable).name, *sys.argv]),
              "serve_args": serve_args, "data": str(data), "cpu": cpu_model(), "minutes": args.minutes,
              "interval_s": args.interval, "clients": args.clients, "feed_per_min": args.feed_per_min,
              "think_s": args.think, "stream": {"feed": len(feed), "client_new": len(new), "skipped_bad_gold": skipped},
              "intervals": [], "rss_slope_mb_per_h": None, "pss_slope_mb_per_h": None, "slope_after_minute": None,
              "server_died": False, "error_samples": [], "finished": False}
    print(f"soak: stream of {len(feed)} fed + {len(new)} client problems ({skipped} dropped: gold refused by "
          f"check_gold); data {data}", file=sys.stderr)
    tally, stop, submitted = load.Tally(), threading.Event(), []
    server = Served(data, serve_args, env)
    threads: list[threading.Thread] = []
    try:
        t0 = time.monotonic()
        server.wait_ready(900)
        report["serve_ready_s"] = round(time.monotonic() - t0, 1)
        print(f"soak: serve ready in {report['serve_ready_s']} s on {server.url}", file=sys.stderr)
        threads = [threading.Thread(target=load.feeder, args=(server, feed, args.feed_per_min, stop, submitted, tally),
                                    daemon=True)]
        threads += [threading.Thread(target=load.client, args=(server, c, args.model, submitted, new, stop, tally,
                                                          args.think, args.seed), daemon=True)
                    for c in range(args.clients)]
        t_start = t_prev = time.monotonic()
        end = t_start + args.minutes * 60
        for t in threads:
            t.start()
        verified = 0
        while time.monotonic() < end - 1e-3:
            next_at = min(end, t_prev + args.interval)
            while time.monotonic() < next_at and server.proc.poll() is None:
                time.sleep(min(1.0, max(0.0, next_at - time.monotonic())))
            report["server_died"] = server.proc.poll() is not None
            row = sample(server, data, t_start, t_prev, verified, tally)
            t_prev, verified = time.monotonic(), row["verified"]
            report["intervals"].append(row)
            report["error_samples"] = tally.error_samples[:20]
            write_json(out, report)
            print(f"[{row['minute']:6.1f} min] rss {row['rss_mb']:.0f} MB (pss {row['pss_mb']:.0f}, "
                  f"{row['processes']} procs) store {row['store_mb']:.1f} MB rows {row['catalog_rows']} "
                  f"verified {row['verified']} ({row['verified_per_h']}/h) answers {row['answers_ok']}/"
                  f"{row['answers']} p50 {row['p50_s']} p99 {row['p99_s']} s busy {row['busy']} errors "
                  f"{row['errors']} learner {row['learner_state']}/{row['learner_restarts']} tier {row['ram_tier_mb']} MB load "
                  f"{row['load'][0]}", file=sys.stderr)
            if report["server_died"]:
                print(f"soak: the server died (exit {server.proc.returncode}): {server.tail()[-600:]}",
                      file=sys.stderr)
                break
    finally:
        stop.set()
        drain_by = time.monotonic() + 300  # requests in flight finish (or time out) first
        for t in threads:
            t.join(timeout=max(0.0, drain_by - time.monotonic()))
        late_rows = tally.take()  # requests that ended after the last sample (drained, or failed at a death)
        report["after_last_interval"] = {
            "requests": len(late_rows), "busy": sum(1 for r in late_rows if load.is_busy(r[0], r[1])),
            "errors": sum(1 for r in late_rows if load.is_error(r[0], r[1]))}
        report["error_samples"] = tally.error_samples[:20]
        report["serve_log_tail"] = server.tail()[-1500:]
        rc = server.stop()
        report["serve_exit"] = rc
        leftover = server.session()
        if leftover:
            report["leftover_pids"] = leftover
        if not args.keep_data:
            shutil.rmtree(data.parent, ignore_errors=True)
    rows = report["intervals"]
    skip = min(10.0, args.minutes / 3)
    report["slope_after_minute"] = round(skip, 2)
    late = [r for r in rows if r["minute"] > skip]
    report["rss_slope_mb_per_h"] = slope_per_h([(r["minute"], r["rss_mb"]) for r in late])
    report["pss_slope_mb_per_h"] = slope_per_h([(r["minute"], r["pss_mb"]) for r in late])
    report["process_slopes"] = process_slopes(late)
    report["finished"] = True
    summary = {
        "minutes": round(rows[-1]["minute"], 2) if rows else 0.0, "intervals": len(rows),
        "rss_slope_mb_per_h": report["rss_slope_mb_per_h"], "pss_slope_mb_per_h": report["pss_slope_mb_per_h"],
        "rss_mb_first": rows[0]["rss_mb"] if rows else None, "rss_mb_last": rows[-1]["rss_mb"] if rows else None,
        "store_mb_last": rows[-1]["store_mb"] if rows else None, "verified": rows[-1]["verified"] if rows else 0,
        "answers": sum(r["answers"] for r in rows),
        "busy": sum(r["busy"] for r in rows) + report["after_last_interval"]["busy"],
        "errors": sum(r["errors"] for r in rows) + report["after_last_interval"]["errors"],
        "server_died": report["server_died"],
        "load_last": rows[-1]["load"] if rows else None,
        "top_process_slopes": [{k: p[k] for k in ("pid", "name", "rss_mb_first", "rss_mb_last", "rss_slope_mb_per_h")}
                               for p in report["process_slopes"][:4]], "report": str(out), "png": str(out.with_suffix(".png")),
    }
    report["summary"] = summary
    write_json(out, report)
    if rows:
        plot(report, out.with_suffix(".png"))
    print(f"soak: {summary['intervals']} intervals, RSS slope {summary['rss_slope_mb_per_h']} MB/h (PSS "
          f"{summary['pss_slope_mb_per_h']}) after minute {report['slope_after_minute']}, verified "
          f"{summary['verified']}, answers {summary['answers']}, busy {summary['busy']}, errors {summary['errors']}"
          f"{', SERVER DIED' if report['server_died'] else ''}; {out}", file=sys.stderr)
    print(json.dumps(summary) if args.json else json.dumps(summary, indent=1))
    return 1 if report["server_died"] or summary["errors"] > 0 or not rows else 0


if __name__ == "__main__":
    sys.exit(main())
