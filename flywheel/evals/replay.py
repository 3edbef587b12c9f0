"""`rescore` (no model: recompute verdicts and scores from recorded outputs) and `replay` (re-execute
every recorded spec and compare output hashes), both against a sealed manifest."""

from __future__ import annotations

import math

from galahad.flywheel.errors import GalahadError
from galahad.flywheel.evals.evidence import canonical, check_seal
from galahad.flywheel.evals.spec import SCORERS, Spec, execute, judge

SPEC_FIELDS = tuple(Spec.__dataclass_fields__)


def _same(a, b) -> bool:
    """Scores are compared exactly after a canonical JSON round trip (floats included)."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return canonical(a) == canonical(b)


def rescore(manifest: dict, verifier) -> dict:
    kind = manifest["kind"]
    if kind not in SCORERS:
        # Comparing recorded scores with themselves would say "OK" about anything: refuse instead.
        raise GalahadError(f"cannot rescore a {str(kind)[:40]!r} manifest: its scores are measurements, not "
                           f"recomputable from its records (rescorable kinds: {', '.join(sorted(SCORERS))})")
    problems = check_seal(manifest)
    records = manifest["records"]
    for i, rec in enumerate(records):
        if "output_sha256" not in rec:
            continue
        again = judge(verifier, rec["gold"], rec["output_text"])
        if again["verified"] != rec["verified"] or again["answer"] != rec["answer"]:
            problems.append(f"record {i} ({rec['id']}, {rec['condition']}): verdict {rec['verified']} "
                            f"recorded, {again['verified']} recomputed")
            rec = {**rec, **again}
            records = records[:i] + [rec] + records[i + 1:]
    scores = SCORERS[kind](records, manifest["config"])
    for key in sorted(set(scores) | set(manifest["scores"])):
        if not _same(scores.get(key), manifest["scores"].get(key)):
            problems.append(f"score {key!r}: recorded {str(manifest['scores'].get(key))[:60]}, "
                            f"recomputed {str(scores.get(key))[:60]}")
    return {"ok": not problems, "problems": problems, "scores": scores}


def replay(manifest: dict, engine, store) -> dict:
    """Re-execute each record; outputs must hash identically (fingerprints are checked by the graft)."""
    mismatches, checked = [], 0
    if manifest.get("model_fingerprint") not in (None, engine.model_fingerprint):
        return {"ok": False, "checked": 0, "mismatches": ["model fingerprint differs from the manifest's"]}
    if manifest.get("runtime_fingerprint") not in (None, engine.runtime_fingerprint):
        return {"ok": False, "checked": 0, "mismatches": ["runtime fingerprint differs from the manifest's"]}
    for i, rec in enumerate(manifest["records"]):
        if "output_sha256" not in rec:
            continue
        spec = Spec(**{k: rec[k] for k in SPEC_FIELDS if k in rec})  # fields added later keep their default
        out = execute(engine, store, spec)
        checked += 1
        if out["output_sha256"] != rec["output_sha256"] or out["input_sha256"] != rec["input_sha256"]:
            mismatches.append(f"record {i} ({rec['id']}, {rec['condition']}): output hash differs")
    return {"ok": not mismatches and checked > 0, "checked": checked, "mismatches": mismatches}
