"""Gold solutions: when no sample verifies, a trusted gold written as the answer, deposited like a sample.

A problem whose sampling budget runs out with no verified attempt still has a gold. When that gold is
trusted, the learner deposits a *gold solution*: the gold, one line, as the answer of the solution segment
(`prompts.solution_segment`, the same text a verified sample's answer gives), prefilled by the same exact
engine, so the next ask recalls it like any other solution. Its attempt is recorded with provenance `gold`
(`attempts.provenance`; a model's attempt is `sampled`), no tokens, and the verifier's verdict on it.

Trusted means the existing gold checks vouch for it (`problems/golds.py`): the problem's `gold_source` is
`computed` (the gold equals the value computed from its canonical key) and it still does, re-read now by the
key reader (`check_gold`). A gold that only someone gave (a file, an API caller) is never written as a
solution: a wrong one would be recalled as verified. `LoopConfig.gold_solutions` turns them off.
"""

from __future__ import annotations

from galahad.flywheel.problems.golds import COMPUTED, check_gold


def trusted_gold(problem: dict) -> str | None:
    """The answer a gold solution of `problem` writes (its gold, one line), or None when the gold is not
    trusted: its `gold_source` is not `computed`, or the key reader no longer computes the same value."""
    if problem.get("gold_source") != COMPUTED:
        return None
    answer = " ".join(str(problem.get("answer", "")).split())
    check = check_gold(str(problem.get("text", "")), answer)
    if not answer or not check.computed or check.error is not None:
        return None
    return answer
