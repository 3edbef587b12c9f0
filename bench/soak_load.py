"""The load `bench/soak.py` puts on a running `galahad serve`, and what it reads off the server's processes.

Owns: the problem stream (built-in families, GSM8K train, reasoning-gym; golds from the sources, each gold
pre-checked here with the service's own `check_gold` so that the bench never submits what intake must
refuse), the feeder thread (POST /v1/problems, one problem at a time, at a steady rate), the client threads
(POST /v1/solve with the gold: recurring problems already submitted and new ones, and now and then the same
through POST /v1/chat/completions), the tally of every request they make (latency, status: ok / busy /
error), and the memory of a process session (sum of VmRSS and of Pss over its live PIDs).
"""

from __future__ import annotations

import json
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ANSWER_ENDPOINTS = ("/v1/solve", "/v1/chat/completions")
RG_DATASETS = ("basic_arithmetic", "chain_sum", "simple_equations")


@dataclass
class Tally:
    """Every request of the feeder and the clients; `take()` hands over and clears the current interval's."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    rows: list = field(default_factory=list)  # (endpoint, status, seconds, answer path or None)
    error_samples: list = field(default_factory=list)  # the first few errors, whole runs long

    def add(self, endpoint: str, status: int, seconds: float, path: str | None = None, note: str = "") -> None:
        with self.lock:
            self.rows.append((endpoint, status, seconds, path))
            if is_error(endpoint, status) and len(self.error_samples) < 20:
                self.error_samples.append(f"{endpoint} {status}: {note[:200]}")

    def take(self) -> list:
        with self.lock:
            rows, self.rows = self.rows, []
        return rows


def is_busy(endpoint: str, status: int) -> bool:
    """The documented Busy answer: 503 with Retry-After on /v1/solve, 429 on the OpenAI routes."""
    return status == 429 or (status == 503 and endpoint == "/v1/solve")


def is_error(endpoint: str, status: int) -> bool:
    """Anything but 2xx and Busy; status 0 is a request that got no HTTP answer at all (refused, timed out)."""
    return not 200 <= status < 300 and not is_busy(endpoint, status)


def stream(n_each: int, seed: int) -> tuple[list, list, int]:
    """(feed, client_new, skipped): problems for the feeder (sources interleaved round-robin), problems the
    clients bring themselves (built-in families, another seed), and how many were dropped because intake
    would refuse their gold. Distinct texts throughout."""
    from galahad.flywheel.problems.families import FAMILIES, generate
    from galahad.flywheel.problems.golds import check_gold
    from galahad.flywheel.problems.sources import gsm8k, reasoning_gym, sample

    per_family = max(1, n_each // 2)
    rng = random.Random(seed)
    builtin = [p for f in FAMILIES for p in generate(f, min(per_family, FAMILIES[f].size()), seed)]
    rng.shuffle(builtin)  # every family from the start
    sources = [builtin, sample(gsm8k("train"), n_each, seed)]
    sources += [reasoning_gym(name, n_each, seed) for name in RG_DATASETS]
    client_pool = [p for f in FAMILIES for p in generate(f, min(per_family, FAMILIES[f].size()), seed + 1)]
    seen, skipped = set(), 0

    def keep(p) -> bool:
        nonlocal skipped
        if p.hash in seen:
            return False
        if check_gold(p.problem, p.answer).error:
            skipped += 1
            return False
        seen.add(p.hash)
        return True

    feed = []
    for i in range(max(len(s) for s in sources)):
        feed += [s[i] for s in sources if i < len(s) and keep(s[i])]
    rng.shuffle(client_pool)
    return feed, [p for p in client_pool if keep(p)], skipped


def call(server, endpoint: str, body: object, tally: Tally) -> tuple[int, dict]:
    """One POST, timed and tallied; (status, JSON body or {}). A transport failure is status 0."""
    t0 = time.perf_counter()
    try:
        status, headers, raw = server.request("POST", endpoint, json.dumps(body).encode(),
                                              headers={"Content-Type": "application/json"})
    except Exception as exc:  # noqa: BLE001 - counted as an error, never hidden
        tally.add(endpoint, 0, time.perf_counter() - t0, note=f"{type(exc).__name__}: {exc}")
        return 0, {}
    dt = time.perf_counter() - t0
    try:
        obj = json.loads(raw)
    except ValueError:
        obj = {}
    path = None
    if isinstance(obj, dict):
        path = obj.get("path") or (obj.get("galahad") or {}).get("path")
    tally.add(endpoint, status, dt, path, raw[:200].decode("utf-8", "replace"))
    return status, obj if isinstance(obj, dict) else {}


def feeder(server, feed: list, per_minute: float, stop: threading.Event, submitted: list, tally: Tally) -> None:
    """POST /v1/problems one problem at a time, `per_minute` a minute; what was accepted joins `submitted`."""
    gap = 60.0 / per_minute
    for p in feed:
        t0 = time.monotonic()
        status, _ = call(server, "/v1/problems", [p.to_dict()], tally)
        if 200 <= status < 300:
            submitted.append(p)
        if stop.wait(max(0.0, gap - (time.monotonic() - t0))):
            return


def client(server, c: int, model: str, submitted: list, new: list, stop: threading.Event, tally: Tally,
           think: float, seed: int) -> None:
    """One client: 60% a recurring problem (fed or brought earlier), else a new one of its own; every 8th
    request goes through /v1/chat/completions (gold in `metadata`) instead of /v1/solve. All carry golds."""
    rng, mine, i = random.Random(seed * 1000 + c), [], 0
    while not stop.is_set():
        pool = submitted + mine
        if pool and (rng.random() < 0.6 or not new):
            p = rng.choice(pool)
        elif new:
            p = new.pop()  # list.pop is atomic: no two clients bring the same problem
            mine.append(p)
        else:
            stop.wait(1.0)
            continue
        i += 1
        if i % 8 == 0:
            status, _ = call(server, "/v1/chat/completions", {
                "model": model, "messages": [{"role": "user", "content": p.problem}],
                "metadata": {"gold": p.answer}}, tally)
        else:
            status, _ = call(server, "/v1/solve", {"problem": p.problem, "gold": p.answer}, tally)
        stop.wait(think + (1.0 if status in (429, 503) else 0.0))  # Retry-After is 1 s


def process_name(pid: int) -> str:
    """What a session process is, from its command line: a Ray worker's `ray::Class` title (an actor's class,
    or `IDLE`), a Ray daemon's program name (raylet, gcs_server, ...), else the program and its first argument
    (the serve driver: `python -m galahad`)."""
    try:
        argv = [a for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    except OSError:
        return "gone"
    if not argv:
        return "?"
    head = argv[0].decode(errors="replace")
    if head.startswith("ray::"):
        return head.split()[0]
    name = Path(head.split()[0]).name
    if name.startswith("python") and len(argv) > 1:
        rest = [a.decode(errors="replace") for a in argv[1:3]]
        return " ".join([name, *rest]) if rest[0] == "-m" else f"{name} {Path(rest[0]).name}"
    return name


def session_memory(pids: list[int]) -> tuple[float, float, dict[str, dict]]:
    """(sum of VmRSS, sum of Pss) in MB over `pids` (Pss splits shared pages among their sharers), and per
    process {"PID": {"name", "rss_mb", "pss_mb"}} (which process grows)."""
    rss = pss = 0
    each: dict[str, dict] = {}
    for pid in pids:
        try:
            r = p = 0
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    r = int(line.split()[1])
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    p = int(line.split()[1])
        except (OSError, ValueError):  # gone meanwhile
            continue
        rss, pss = rss + r, pss + p
        each[str(pid)] = {"name": process_name(pid), "rss_mb": round(r / 1024, 1), "pss_mb": round(p / 1024, 1)}
    return rss / 1024, pss / 1024, each


def tree_bytes(root: Path) -> int:
    """Bytes of every regular file under `root` (apparent sizes)."""
    total = 0
    for f in root.rglob("*") if root.exists() else ():
        try:
            if f.is_file():
                total += f.stat().st_size
        except OSError:
            continue
    return total
