"""`eval recurrence`: problems the base model does not solve within a budget, answered from their graft.

Every verified problem with a recall artifact is evaluated (`limit` caps it). The base condition samples up
to k attempts of at most T tokens from the few-shot prompt (seeds distinct from the learning run's) and is
credited with pass@k; the graft condition grafts the problem's recall artifact and decodes greedily.
Scores are reported on the problems the base fails and on all problems.
"""

from __future__ import annotations

from galahad.flywheel.config import RecurrenceConfig
from galahad.flywheel.evals.spec import Spec, make_record, sample_records, scorer
from galahad.workers.sampling import sample_seed


def candidates(catalog, limit: int | None, fingerprints: tuple[str, str] | None = None) -> list[dict]:
    """Verified problems with a recall artifact (made under `fingerprints`, if given), oldest first."""
    out = catalog.recalls.all(fingerprints)
    return out[:limit] if limit else out


def run(engine, catalog, store, verifier, cfg: RecurrenceConfig, meter=None, progress=None,
        problems: list[dict] | None = None) -> list[dict]:
    records = []
    for p in problems if problems is not None else candidates(catalog, cfg.limit):
        samples = [Spec(p["id"], "base", p["text"], p["answer"], "few-shot", None, cfg.temperature,
                        sample_seed(cfg.seed, p["id"], i), cfg.max_tokens, i) for i in range(cfg.k)]
        records += sample_records(engine, store, verifier, samples, meter)
        spec = Spec(p["id"], "graft", p["text"], p["answer"], "query", p["artifact_id"], 0.0, 0, cfg.graft_max_tokens)
        records.append(make_record(engine, store, verifier, spec, meter))
        if progress:
            progress()
    return records


def _block(problems: list[str], by: dict) -> dict:
    def total(cond: str, key: str) -> float:
        return sum(r[key] or 0 for p in problems for r in by[p][cond])

    n = len(problems)
    base_ok = sum(any(r["verified"] for r in by[p]["base"]) for p in problems)
    graft_ok = sum(all(r["verified"] for r in by[p]["graft"]) for p in problems)
    base_tokens, graft_tokens = total("base", "decode_tokens"), total("graft", "decode_tokens")
    energy = [r["energy_joules"] for p in problems for c in by[p].values() for r in c]
    return {
        "problems": n,
        "base_accuracy": base_ok / n if n else 0.0,
        "graft_accuracy": graft_ok / n if n else 0.0,
        "base_decode_tokens": int(base_tokens),
        "graft_decode_tokens": int(graft_tokens),
        "token_ratio": (base_tokens / graft_tokens) if graft_tokens else None,
        "graft_max_decode_tokens": max((r["decode_tokens"] for p in problems for r in by[p]["graft"]), default=0),
        "base_seconds": total("base", "seconds"),
        "graft_seconds": total("graft", "seconds"),
        "base_cpu_seconds": total("base", "cpu_seconds"),
        "graft_cpu_seconds": total("graft", "cpu_seconds"),
        "base_energy_joules": total("base", "energy_joules") if all(e is not None for e in energy) and energy else None,
        "graft_energy_joules": total("graft", "energy_joules") if all(e is not None for e in energy) and energy else None,
    }


@scorer("recurrence")
def score(records: list[dict], config: dict) -> dict:
    """Top level: problems the base fails within its budget. `all_problems`: every candidate."""
    by: dict[str, dict[str, list]] = {}
    for r in records:
        by.setdefault(r["id"], {"base": [], "graft": []})[r["condition"]].append(r)
    everyone = sorted(by)
    unsolved = [p for p in everyone if not any(r["verified"] for r in by[p]["base"])]
    per_problem = [{"id": p, "base_solved": p not in unsolved,
                    "graft_verified": all(r["verified"] for r in by[p]["graft"]),
                    "base_decode_tokens": sum(r["decode_tokens"] for r in by[p]["base"]),
                    "graft_decode_tokens": sum(r["decode_tokens"] for r in by[p]["graft"])} for p in everyone]
    return {**_block(unsolved, by), "all_problems": _block(everyone, by), "per_problem": per_problem}
