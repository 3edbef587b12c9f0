"""Never wrong twice (issue 52): computable questions asked twice of a fresh `galahad serve` with its learner.

Population: the first text of each `single` group with an exact answer in a held-out phrasing file (default
`bench/data/keys_heldout/test.jsonl`, written by a helper that never read the code) that the key reader computes
(the service can only know an answer it can compute), one area at a time in turn, `--n` of them. Each is asked under the
default answer policy and under `answer_policy: "model"`; the learner drains the queue (and the verified ones'
deposits land); each is asked again.
An answer is right when the verifier accepts it against the file's answer (not the reader's value).

Prints JSON: per ask, right and verified-and-right counts for both policies, the paths and solution kinds, the
drain time. Usage: python bench/bench_never_wrong.py [--file F] [--n 30] [--model gemma3-270m] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from serve_harness import Served, serve_env  # noqa: E402
from soak import cpu_model  # noqa: E402

from galahad.flywheel.problems.canonical import value  # noqa: E402
from galahad.flywheel.problems.golds import exact_number  # noqa: E402
from galahad.flywheel.problems.records import problem_hash  # noqa: E402
from galahad.verifier.verifier import Verifier  # noqa: E402

DEFAULT = Path(__file__).resolve().parent / "data" / "keys_heldout" / "test.jsonl"


def questions(path: Path, n: int) -> list[tuple[str, str]]:
    """The first text of each single group whose exact answer the reader computes, one area at a time in turn
    (areas in file order), so every area is asked."""
    seen, by_area = set(), {}
    for line in path.read_text().splitlines():
        r = json.loads(line) if line.strip() else None
        if not r or r["group"] in seen or r.get("kind") != "single":
            continue
        seen.add(r["group"])
        if exact_number(r["answer"]) is not None and value(r["text"]) is not None:
            by_area.setdefault(r.get("area", ""), []).append((r["text"], r["answer"]))
    turns = [q for rank in range(max(map(len, by_area.values()), default=0))
             for qs in by_area.values() if rank < len(qs) for q in [qs[rank]]]
    return turns[:n]


def drain(server: Served, ids: list[str], limit: float = 1800.0) -> float:
    """Seconds until the queue is empty and every verified problem of `ids` has its recall artifact (a verdict
    is committed before its deposit, which lands a moment later)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        code, st = server.json("GET", "/v1/catalog/stats")
        by = st.get("by_status", {}) if code == 200 else {}
        if code == 200 and by.get("pending", 0) + by.get("claimed", 0) == 0 and all(deposited(server, i) for i in ids):
            return time.monotonic() - t0
        time.sleep(2)
    raise SystemExit(f"bench_never_wrong: the learner did not drain in {limit:.0f} s")


def deposited(server: Served, problem_id: str) -> bool:
    """Not (verified and its recall artifact still on its way)."""
    code, p = server.json("GET", f"/v1/problems/{problem_id}")
    return code != 200 or p["status"] != "verified" or p["recall_artifact_id"] is not None


def summary(rows: list[dict], n: int) -> dict:
    out = {}
    for policy in ("default", "model"):
        rs = [r[policy] for r in rows]
        out[policy] = {"right": sum(r["right"] for r in rs), "verified_and_right": sum(
            r["right"] and r["verified"] is True for r in rs), "of": n,
            "paths": dict(Counter(r["path"] for r in rs)), "solutions": dict(Counter(str(r["solution"]) for r in rs))}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--file", type=Path, default=DEFAULT)
    ap.add_argument("--n", type=int, default=30)
    ap.add_argument("--model", default="gemma3-270m")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    qs = questions(args.file, args.n)
    cache = Path(os.environ.get("GALAHAD_MODEL_CACHE", "~/.cache/galahad-models")).expanduser()
    data = Path(tempfile.mkdtemp(prefix="bench-never-wrong-")) / "data"
    data.mkdir(parents=True)
    verifier = Verifier()
    report: dict = {"command": " ".join([Path(sys.executable).name, *sys.argv]), "file": str(args.file),
                    "questions": len(qs), "model": args.model, "cpu": cpu_model()}
    server = Served(data, ["--model", args.model], serve_env(cache))
    asks: list[list[dict]] = [[], []]
    try:
        server.wait_ready(900)
        for round_ in (0, 1):
            for text, gold in qs:
                row = {"problem": text, "gold": gold}
                for policy in ("default", "model"):
                    body = {"problem": text} | ({"answer_policy": "model"} if policy == "model" else {})
                    code, out = server.json("POST", "/v1/solve", body)
                    if code != 200:
                        raise SystemExit(f"bench_never_wrong: /v1/solve answered {code}: {out}")
                    row[policy] = {"answer": out["answer"], "path": out["path"], "verified": out["verified"],
                                   "solution": out.get("solution"),
                                   "right": bool(verifier.check_answer(gold, out["answer"]).verified)}
                asks[round_].append(row)
            if round_ == 0:
                report["drained_s"] = round(drain(server, [problem_hash(t) for t, _ in qs]), 1)
        report["load"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        report["serve_exit"] = server.stop()
        shutil.rmtree(data.parent, ignore_errors=True)
    n = len(qs)
    report["first_ask"], report["second_ask"] = summary(asks[0], n), summary(asks[1], n)
    report["default_right_on_both"] = sum(a["default"]["right"] and b["default"]["right"]
                                          for a, b in zip(asks[0], asks[1], strict=True))
    report["asks"] = asks if not args.json else None
    print(json.dumps(report) if args.json else json.dumps(report, indent=1))
    return 0 if report["serve_exit"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
