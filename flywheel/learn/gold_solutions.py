"""Gold solutions: when no sample verifies, a trusted gold written as the answer, deposited like a sample.

The gold, one line, is the answer of the solution segment (`prompts.solution_segment`), prefilled by the
same exact engine, so the next ask recalls it like any other solution; its attempt has provenance `gold`,
no tokens, and the verifier's verdict. Trusted means `gold_source` is `computed` and the key reader still
computes the same value (`check_gold`); a gold someone only gave is never written as a solution (a wrong
one would be recalled as verified). `LoopConfig.gold_solutions` turns them off.
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
