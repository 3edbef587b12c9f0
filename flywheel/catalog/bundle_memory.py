"""What bundle format 2 adds to a bundle: the rest of memory (recall rows, problem keys, runtime facts).

Format 1 carried artifacts and their provenance only. Format 2 also carries `recalls`, `problem_keys` and
`runtimes`, each checked or recomputed: a key row must be its text's key (a current-version key that
disagrees is refused); a runtime's fingerprint is the hash of its facts; a recall names a positive verdict
on that very problem and a root artifact in the bundle. A format-1 bundle's keys are computed and its recall
rows derived from the recall artifacts' own headers (`role: recall`).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import select

from galahad.flywheel.catalog.db import now
from galahad.flywheel.catalog.problems import key_row
from galahad.flywheel.catalog.schema import TABLES
from galahad.flywheel.errors import GalahadError, IntegrityError
from galahad.flywheel.problems import canonical

MEMORY = ("problem_keys", "recalls", "runtimes")
# Artifact columns that stay on their machine: where the bytes are, eviction and rebuild bookkeeping.
LOCAL_ARTIFACT = {"location": None, "last_grafted_at": None, "evicted_at": None, "rebuilds": 0}


def select_memory(conn, problems: set[str], artifacts: set[str]) -> dict[str, list[dict]]:
    """The memory rows of an export: keys of its problems, recalls served by its artifacts, and every
    runtime's facts (a few rows: the machines the catalog has seen)."""
    T = TABLES

    def rows(table, cond):
        return [dict(r._mapping) for r in conn.execute(select(T[table]).where(cond))]

    return {
        "problem_keys": rows("problem_keys", T["problem_keys"].c.problem_id.in_(problems)),
        "recalls": [r for r in rows("recalls", T["recalls"].c.problem_id.in_(problems)) if r["artifact_id"] in artifacts],
        "runtimes": [dict(r._mapping) for r in conn.execute(select(T["runtimes"]))],
    }


def recall_artifacts(conn, problems: set[str]) -> set[str]:
    """The recall artifacts of these problems (a library export takes them with its problems)."""
    REC = TABLES["recalls"]
    return set(conn.execute(select(REC.c.artifact_id).where(REC.c.problem_id.in_(problems))).scalars())


def runtime_hash(facts: Any) -> str:
    """`workers.runtime.runtime_fingerprint` of recorded facts (the same canonical JSON)."""
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()


def check_memory(tables: dict[str, list[dict[str, Any]]], extras: dict[str, dict]) -> None:
    """Check (and complete) the memory rows in place: keys recomputed, recalls checked (format 1: derived
    from headers), runtime facts against their fingerprints, each artifact's `extra` equal to its header's."""
    def bad(what: str) -> None:
        raise IntegrityError(f"corrupted bundle: {what}")

    for a in tables["artifacts"]:
        header = extras.get(a["id"], {})
        if a.get("extra") is not None and a["extra"] != header:
            bad(f"artifact {a['id'][:16]} row's extra disagrees with its header")
        a["extra"] = dict(header)
        a.update({k: v for k, v in LOCAL_ARTIFACT.items() if k != "location"})
    problems = {p["id"]: p for p in tables["problems"]}
    keys = {}
    for k in tables["problem_keys"]:
        if k["problem_id"] not in problems:
            raise GalahadError(f"incomplete bundle: a key row names problem {str(k['problem_id'])[:16]}, which it lacks")
        mine = key_row(k["problem_id"], problems[k["problem_id"]]["text"])
        if k["key_version"] == canonical.KEY_VERSION and (k["canonical_key"], k["numbers"]) != (
                mine["canonical_key"], mine["numbers"]):
            bad(f"problem {k['problem_id'][:16]}'s key is not the key of its text")
    for pid, p in problems.items():
        keys[pid] = key_row(pid, p["text"])
    tables["problem_keys"] = list(keys.values())
    for r in tables["runtimes"]:
        if runtime_hash(r["facts"]) != r["fingerprint"]:
            bad(f"runtime {str(r['fingerprint'])[:16]} is not the hash of its facts")
    if not tables["recalls"]:  # format 1 (or none recorded): the recall artifacts say so in their headers
        tables["recalls"] = [dict(problem_id=x["problem_id"], artifact_id=aid, verification_id=x["verification_id"],
                                  created_at=now())
                             for aid, x in sorted(extras.items()) if x.get("role") == "recall"
                             and x.get("problem_id") in problems and isinstance(x.get("verification_id"), str)]
    _check_recalls(tables, extras, bad)


def _check_recalls(tables: dict[str, list[dict[str, Any]]], extras: dict[str, dict], bad) -> None:
    arts = {a["id"]: a for a in tables["artifacts"]}
    verifications = {v["id"]: v for v in tables["verifications"]}
    attempts = {a["id"]: a for a in tables["attempts"]}
    for r in tables["recalls"]:
        v = verifications.get(r["verification_id"])
        if r["artifact_id"] not in arts or v is None:
            raise GalahadError(f"incomplete bundle: recall of problem {str(r['problem_id'])[:16]} names rows it lacks")
        if v["verified"] is not True or attempts[v["attempt_id"]]["problem_id"] != r["problem_id"]:
            bad(f"recall of problem {r['problem_id'][:16]} names verification {v['id'][:12]}, which is not an "
                "accepted solution of that problem")
        if extras.get(r["artifact_id"], {}).get("problem_id") not in (None, r["problem_id"]):
            bad(f"recall artifact {r['artifact_id'][:16]}'s header names another problem")
        if arts[r["artifact_id"]]["parent_id"] is not None:
            bad(f"recall artifact {r['artifact_id'][:16]} is not a root (a recall is its solution alone)")
