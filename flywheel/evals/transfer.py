"""`eval transfer`: does grafted memory help on problems it has never seen?

Held-out instances (a trained template, new numbers) and held-out templates are drawn from the built-in
families with the eval's own seed, never from the catalog. Conditions, greedy, in the memory's prompt
format unless noted: `base` (the few-shot prompt, no graft), `empty` (the query alone), `random` (another
topic's chain) and one `library` condition per retrieval policy (the first n solutions of the newest chain
of the problem's own library, as `solve` picks them). Each library policy is compared, paired, against each
control; the one that grafts what `solve` grafts, beside `base`, is the evidence for its transfer gate.
"""

from __future__ import annotations

import random

from galahad.flywheel.config import TransferConfig
from galahad.flywheel.evals.spec import Spec, make_record, scorer
from galahad.flywheel.evals.stats import paired, wilson
from galahad.flywheel.memory.library_names import template_library
from galahad.flywheel.memory.policy import library_prefix
from galahad.flywheel.problems import families
from galahad.flywheel.problems.records import problem_hash

CONTROLS = ("base", "empty", "random")


def _library_heads(catalog) -> dict[str, dict]:
    return {lib["library"]: lib for lib in catalog.libraries.all() if lib.get("artifacts")}


def heldout(catalog, cfg: TransferConfig) -> list[dict]:
    """Problems per (family, split), first `per_split` of each family's space shuffled by the eval seed."""
    known = {p["id"] for p in catalog.problems.find(limit=10**9)}
    trained = {p["template"] for p in catalog.problems.find(limit=10**9) if p.get("template")}
    chosen = []
    for name in cfg.families:
        fam = families.family(name)
        pool = families.generate(name, fam.size(), cfg.seed)
        counts = {"heldout_instances": 0, "heldout_templates": 0}
        for p in pool:
            if problem_hash(p.problem) in known:
                continue
            split = "heldout_instances" if p.template in trained else "heldout_templates"
            if counts[split] < cfg.per_split:
                counts[split] += 1
                chosen.append({"id": problem_hash(p.problem), "text": p.problem, "answer": p.answer,
                               "family": name, "topic": p.topic, "template": p.template, "split": split})
    return chosen


def plan(catalog, cfg: TransferConfig, fingerprints: tuple[str, str] | None = None) -> list[tuple[Spec, dict]]:
    """Every (spec, meta) to run; library conditions graft only chains made under `fingerprints`."""
    libs = _library_heads(catalog)
    out = []
    for p in heldout(catalog, cfg):
        meta = {k: p[k] for k in ("family", "split", "topic", "template")}

        def spec(condition, prompt, tail, _p=p):  # no memory and the few-shot prompt: the solver's base route
            return Spec(_p["id"], condition, _p["text"], _p["answer"], prompt, tail, 0.0, 0, cfg.max_tokens,
                        shared_prefix=tail is None and prompt == "few-shot")

        out.append((spec("base", "few-shot", None), meta))
        out.append((spec("empty", "query", None), meta))
        others = sorted(name for name, lib in libs.items() if lib.get("topic") != p["topic"])
        if others:
            rng = random.Random(f"{cfg.seed}:{p['id']}")
            tail = library_prefix(catalog, rng.choice(others), max(cfg.max_solutions), fingerprints)
            out.append((spec("random", "query", tail), meta))
        own = template_library(p["template"]) if p["split"] == "heldout_instances" else None
        scopes = [("template", own)] if own in libs else []
        scopes += [("topic", name) for name in sorted(libs) if libs[name].get("topic") == p["topic"]
                   and name != own][:1]
        for scope, library in scopes:
            for n in cfg.max_solutions:
                tail = library_prefix(catalog, library, n, fingerprints)
                if tail:  # `library`: the gate this condition is evidence for (`evals/gate_evidence.py`)
                    out.append((spec(f"library:{scope}:n{n}", "query", tail), {**meta, "library": library}))
    return out


def run(engine, catalog, store, verifier, cfg: TransferConfig, meter=None, progress=None,
        planned: list | None = None) -> list[dict]:
    records = []
    fingerprints = (engine.model_fingerprint, engine.runtime_fingerprint)
    for spec, meta in planned if planned is not None else plan(catalog, cfg, fingerprints):
        records.append({**make_record(engine, store, verifier, spec, meter), **meta})
        if progress:
            progress()
    return records


@scorer("transfer")
def score(records: list[dict], config: dict) -> dict:
    """Accuracy with Wilson 95% intervals per (family, split, condition); paired tests library vs controls."""
    cells: dict[tuple, dict[str, bool]] = {}
    for r in records:
        cells.setdefault((r["family"], r["split"], r["condition"]), {})[r["id"]] = bool(r["verified"])
    groups = sorted({(f, s) for f, s, _ in cells} | {("all", s) for _, s, _ in cells})
    for f, s, c in list(cells):
        cells.setdefault(("all", s, c), {}).update({f"{f}/{k}": v for k, v in cells[(f, s, c)].items()})
    table, comparisons = [], []
    for f, s in groups:
        conds = sorted(c for (ff, ss, c) in cells if (ff, ss) == (f, s))
        for c in conds:
            v = cells[(f, s, c)]
            k, n = sum(v.values()), len(v)
            table.append({"family": f, "split": s, "condition": c, "correct": k, "n": n,
                          "accuracy": k / n if n else 0.0, "ci95": list(wilson(k, n))})
        for lib in (c for c in conds if c.startswith("library")):
            for ctrl in (c for c in CONTROLS if c in conds):
                ids = sorted(set(cells[(f, s, lib)]) & set(cells[(f, s, ctrl)]))
                res = paired([cells[(f, s, lib)][i] for i in ids], [cells[(f, s, ctrl)][i] for i in ids])
                comparisons.append({"family": f, "split": s, "condition": lib, "control": ctrl, **res})
    return {"problems": len({r["id"] for r in records}), "records": len(records), "table": table,
            "comparisons": comparisons}
