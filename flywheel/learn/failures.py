"""Why a problem failed: the answers its attempts gave, summed up when its sampling budget runs out.

`WrongAnswers` collects each claimed problem's answers and, when it fails, gives the record the catalog
keeps (`problems.failure`, shown by `/v1/problems/{id}` and `catalog show`): `attempts`, `distinct_answers`,
`no_answer`, `most_common` (the most frequent wrong answer, earliest on a tie) and `closest` (the answer
nearest the gold where both are exact numbers, else null). Answers are cut at `MAX_ANSWER_CHARS`.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from galahad.flywheel.problems.golds import exact_number

MAX_ANSWER_CHARS = 200


class WrongAnswers:
    """The answers each problem's attempts gave, by problem id, until it verifies or fails."""

    def __init__(self) -> None:
        self.seen: dict[str, Counter[str]] = {}
        self.attempts: dict[str, int] = {}

    def add(self, problem_id: str, answer: str | None) -> None:
        self.attempts[problem_id] = self.attempts.get(problem_id, 0) + 1
        self.seen.setdefault(problem_id, Counter())[" ".join(str(answer or "").split())[:MAX_ANSWER_CHARS]] += 1

    def drop(self, problem_id: str) -> None:
        self.seen.pop(problem_id, None)
        self.attempts.pop(problem_id, None)

    def reason(self, problem_id: str, gold: str) -> dict[str, Any]:
        """The failure record of `problem_id` (see the module's docstring); forgets the problem."""
        answers = self.seen.pop(problem_id, Counter())
        attempts = self.attempts.pop(problem_id, 0)
        given = Counter({a: n for a, n in answers.items() if a})
        common = max(given.items(), key=lambda kv: kv[1], default=None)  # max keeps the first of a tie
        target, closest = exact_number(gold), None
        if target is not None:
            numbers = [(abs(v - target), a) for a in given if (v := exact_number(a)) is not None]
            if numbers:
                distance, answer = min(numbers, key=lambda da: da[0])
                closest = {"answer": answer, "distance": float(distance)}
        return {"attempts": attempts, "distinct_answers": len(given), "no_answer": answers.get("", 0),
                "most_common": {"answer": common[0], "count": common[1]} if common else None,
                "closest": closest}


def describe(failure: dict[str, Any] | None) -> str:
    """A failure record in one line, for tables (`galahad catalog show`)."""
    if not failure:
        return ""
    parts = [f"{failure.get('attempts', 0)} attempts, {failure.get('distinct_answers', 0)} distinct answers"]
    if failure.get("no_answer"):
        parts.append(f"{failure['no_answer']} without an answer")
    if failure.get("most_common"):
        parts.append(f"most common {failure['most_common']['answer']!r} (x{failure['most_common']['count']})")
    if failure.get("closest"):
        parts.append(f"closest {failure['closest']['answer']!r} (off by {failure['closest']['distance']:g})")
    return "; ".join(parts)
