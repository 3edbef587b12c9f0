"""How problems and solutions become text: one format for sampling, depositing and answering.

A deposited solution is a `Question: ...\\nAnswer: ...\\n\\n` segment; a query is the same without the
answer. Because grafted memory and the query share the format, the model can copy an answer it has
seen (recurrence) or follow worked examples of the same template (transfer).
"""

from __future__ import annotations

# Generic worked examples for the base model's few-shot prompt; deliberately not drawn from any
# evaluation family, so the base condition is not given the families' exact phrasings.
BASE_SHOTS: tuple[tuple[str, str], ...] = (
    ("What is 2 + 3?", "5"),
    ("What is 9 - 4?", "5"),
    ("What is 3 times 4?", "12"),
    ("If x + 2 = 7, what is x?", "5"),
)
ANSWER_STOP = "\n"


def solution_segment(problem: str, answer: str) -> str:
    return f"Question: {problem.strip()}\nAnswer: {answer.strip()}\n\n"


def query(problem: str) -> str:
    return f"Question: {problem.strip()}\nAnswer:"


def few_shot_prompt(problem: str, shots: tuple[tuple[str, str], ...] = BASE_SHOTS) -> str:
    return "".join(solution_segment(q, a) for q, a in shots) + query(problem)


def answer_from_output(output: str) -> str:
    """The model's answer is its first line; anything after is the model continuing the pattern."""
    return output.split(ANSWER_STOP, 1)[0].strip()
