"""`eval transfer --problems FILE`: what memory does for a user's own problems, under seven conditions.

  base     the base model's few-shot prompt, no memory;
  empty    the query alone in the memory's format (empty-memory control);
  random   k random verified solutions composed into a chain and grafted (random-memory control);
  nearest  the k verified solutions most similar in text, the most similar last, grafted exactly;
  text     `nearest`'s solutions as plain prompt tokens, recomputed: outputs byte-identical to `nearest`'s;
  transfer `Solver.solve(gated=False)`: every route memory has, whatever the gates say; with `base`, the
           evidence for each (model, library) gate (`evals/gate_evidence.py`);
  system   `Solver.solve` itself, gated, each route it answers run as a recorded spec.
Every problem is tagged with its overlap with the catalog's verified problems (`hash`, `key`, `similar`,
`none`, and for a paraphrase file whether its source is verified): reported per condition, never filtered.
"""

from __future__ import annotations

import random

from galahad.flywheel.config import FileTransferConfig
from galahad.flywheel.evals.spec import Spec, decoded_record, make_record, scorer
from galahad.flywheel.evals.stats import paired, wilson
from galahad.flywheel.memory.compose import compose
from galahad.flywheel.memory.solver import Solver
from galahad.flywheel.problems import canonical
from galahad.flywheel.problems.prompts import answer_from_output
from galahad.flywheel.problems.records import problem_hash

CONDITIONS = FileTransferConfig.conditions  # every condition, in report order (its default: all)
CONTROLS = ("base", "empty", "random")
TREATMENTS = ("nearest", "transfer", "system")
KIND = "transfer-file"


def _solutions(catalog, problems: list[dict]) -> list[tuple[str, str]]:
    out = []
    for p in problems:
        sol = catalog.runs.verified_solution(p["id"])
        out.append((p["text"], answer_from_output(sol["output_text"]) if sol else p["answer"]))
    return out


def _source_verified(catalog, source: str | None) -> bool | None:
    if not source or not source.startswith("paraphrase:"):
        return None
    return catalog.recalls.get(source.split(":", 1)[1]) is not None


def run(engine, catalog, store, verifier, problems: list[dict], cfg: FileTransferConfig, solver: Solver,
        meter=None, progress=None) -> list[dict]:
    """Records for every (problem, condition); problems are dicts with text, answer and source."""
    recalled = catalog.recalls.all()
    records = []
    for p in problems:
        pid = problem_hash(p["text"])
        meta = {"problem_id": pid, "overlap": solver.overlap(p["text"]), "source": p.get("source"),
                "source_verified": _source_verified(catalog, p.get("source"))}

        def spec(condition, prompt, tail, recompute=False, decoded=None, max_tokens=cfg.max_tokens, _p=p, _id=pid,
                 shared_prefix=False):
            return Spec(_id, condition, _p["text"], _p["answer"], prompt, tail, 0.0, 0, max_tokens,
                        recompute=recompute, decoded=None if decoded == _p["text"] else decoded,
                        shared_prefix=shared_prefix)

        def record(s: Spec, _meta=meta) -> None:
            records.append({**make_record(engine, store, verifier, s, meter), **_meta})

        want = set(cfg.conditions)
        if "base" in want:
            # the few-shot prefix is prefilled once per process, each problem continues from it (`workers/schedule.py`)
            record(spec("base", "few-shot", None, max_tokens=solver.base_max_tokens, shared_prefix=True))
        if "empty" in want:
            record(spec("empty", "query", None))
        if recalled and "random" in want:
            rng = random.Random(f"{cfg.seed}:{pid}")
            chosen = rng.sample(recalled, min(cfg.k, len(recalled)))
            record(spec("random", "query", compose(engine, catalog, store, _solutions(catalog, chosen))))
        if recalled and "nearest" in want:
            ranked = sorted(recalled, key=lambda c: (canonical.similarity(p["text"], c["text"]), c["id"]))
            nearest = compose(engine, catalog, store, _solutions(catalog, ranked[-cfg.k:]))
            record(spec("nearest", "query", nearest))
            if "text" in want:
                record(spec("text", "query", nearest, recompute=True))
        for condition in ("transfer", "system"):
            if condition in want:
                records.append({**walk(engine, store, verifier, solver, p["text"], condition, spec, meter), **meta})
        if progress:
            progress()
    return records


def walk(engine, store, verifier, solver: Solver, text: str, condition: str, spec, meter) -> dict:
    """One `Solver.solve` walk as `condition` (`system`: gated, as `solve` answers; `transfer`: ungated), each
    route it answers run as a recorded spec; the accepted route's record with its path, library and the
    routes tried."""
    tried: list[tuple[object, dict]] = []  # (route, record) of each route `solve` answers, in its order

    def decode(route):
        s = spec(condition, route.prompt, route.tail, decoded=route.decoded, max_tokens=route.max_tokens,
                 shared_prefix=route.shared_prefix)
        rec, r = decoded_record(engine, store, verifier, s, meter)
        tried.append((route, rec))
        return r

    ans = solver.solve(text, decode=decode, gated=condition == "system")
    # `problem` is the file's text, as in every record; `decoded` (in the spec) is the question asked
    # after the graft when a recall path asks the matched problem's own, so a replay re-runs this spec.
    route, rec = tried[-1]
    return {**rec, "path": ans.path, "library": route.library, "routes_tried": [r.path for r, _ in tried]}


def _cell(values: list[bool]) -> dict:
    k, n = sum(values), len(values)
    return {"correct": k, "n": n, "accuracy": k / n if n else 0.0, "ci95": list(wilson(k, n))}


@scorer(KIND)
def score(records: list[dict], config: dict) -> dict:
    """Accuracy per condition, per overlap tag and per source-verified group; paired comparisons; and
    whether `text` reproduced `nearest` byte for byte on every problem."""
    by: dict[str, dict[str, dict]] = {}
    for r in records:
        by.setdefault(r["condition"], {})[r["problem_id"]] = r
    conds = [c for c in CONDITIONS if c in by]
    conditions = {c: _cell([r["verified"] for r in by[c].values()]) for c in conds}
    tags = sorted({r["overlap"] for r in records})
    by_overlap = {t: {c: _cell([r["verified"] for r in by[c].values() if r["overlap"] == t]) for c in conds}
                  for t in tags}
    groups = sorted({str(r.get("source_verified")) for r in records if r.get("source_verified") is not None})
    by_source_verified = {g: {c: _cell([r["verified"] for r in by[c].values()
                                        if str(r.get("source_verified")) == g]) for c in conds} for g in groups}
    comparisons = []
    for a in (t for t in TREATMENTS if t in by):
        for b in (c for c in CONTROLS if c in by):
            ids = sorted(set(by[a]) & set(by[b]))
            res = paired([by[a][i]["verified"] for i in ids], [by[b][i]["verified"] for i in ids])
            comparisons.append({"condition": a, "control": b, **res})
    same = [by["text"][i]["output_sha256"] == by["nearest"][i]["output_sha256"]
            for i in sorted(set(by.get("text", {})) & set(by.get("nearest", {})))]
    paths: dict[str, int] = {}
    for r in by.get("system", {}).values():
        paths[r["path"]] = paths.get(r["path"], 0) + 1
    cost = {c: {"decode_tokens": sum(r["decode_tokens"] for r in by[c].values()),
                "seconds": sum(r["seconds"] for r in by[c].values())} for c in conds}
    return {"problems": len({r["problem_id"] for r in records}), "records": len(records), "conditions": conditions,
            "by_overlap": by_overlap, "by_source_verified": by_source_verified, "comparisons": comparisons,
            "text_identical_to_nearest": {"identical": sum(same), "n": len(same)}, "system_paths": paths,
            "cost": cost}
