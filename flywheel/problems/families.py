"""Built-in problem families: short plain-text arithmetic the default 270M model can sometimes solve.

Each family has several phrasings (templates), so that held-out templates exist, and a finite space of
numbers, so that generation is sampling without replacement: `generate(family, n, seed)` never repeats a
problem and gives the same list for the same seed on every machine. Answers are integers, as strings.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from galahad.flywheel.config import DEFAULT_FAMILIES
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems.records import Problem

SOURCE = "builtin"

ADD = ("What is {a} + {b}?", "Compute {a} + {b}.", "What is the sum of {a} and {b}?", "Add {a} and {b}.", "{a} + {b} = ?")
SUB = ("What is {a} - {b}?", "Compute {a} - {b}.", "What is {a} minus {b}?", "Subtract {b} from {a}.", "{a} - {b} = ?")
MUL = ("What is {a} * {b}?", "What is {a} times {b}?", "Compute {a} * {b}.", "What is the product of {a} and {b}?",
       "Multiply {a} by {b}.")
LIN = ("Solve for x: x + {b} = {c}.", "If x + {b} = {c}, what is x?", "Find x if x + {b} = {c}.",
       "What number plus {b} equals {c}?", "x + {b} = {c}. What is x?")


@dataclass(frozen=True)
class Family:
    """A generator: every parameter choice times every template is one distinct problem."""

    name: str
    topic: str
    description: str
    templates: tuple[str, ...]
    params: Callable[[], Iterator[dict[str, int]]]
    answer: Callable[[dict[str, int]], int]

    def size(self) -> int:
        return sum(1 for _ in self.params()) * len(self.templates)

    def template_id(self, k: int) -> str:
        return f"{self.name}/t{k}"

    def problem(self, values: dict[str, int], k: int) -> Problem:
        key = "-".join(str(values[v]) for v in sorted(values))
        return Problem(
            id=f"{SOURCE}/{self.name}/t{k}/{key}",
            problem=self.templates[k].format(**values),
            answer=str(self.answer(values)),
            topic=self.topic,
            template=self.template_id(k),
            source=SOURCE,
        )


def _pairs(a_range: range, b_range: range, keep: Callable[[int, int], bool] = lambda a, b: True):
    def params() -> Iterator[dict[str, int]]:
        for a in a_range:
            for b in b_range:
                if keep(a, b):
                    yield {"a": a, "b": b}

    return params


def _linear() -> Iterator[dict[str, int]]:
    for x in range(10):
        for b in range(1, 10):
            yield {"b": b, "c": x + b}


FAMILIES: dict[str, Family] = {
    f.name: f
    for f in (
        Family("add1", "addition", "single-digit addition", ADD, _pairs(range(10), range(10)), lambda v: v["a"] + v["b"]),
        Family("sub1", "subtraction", "single-digit subtraction, non-negative result", SUB,
               _pairs(range(10), range(10), lambda a, b: b <= a), lambda v: v["a"] - v["b"]),
        Family("mul1", "multiplication", "single-digit multiplication", MUL, _pairs(range(10), range(10)),
               lambda v: v["a"] * v["b"]),
        Family("add2x1", "addition", "two-digit plus one-digit addition", ADD, _pairs(range(10, 100), range(1, 10)),
               lambda v: v["a"] + v["b"]),
        Family("add2", "addition", "two-digit addition", ADD, _pairs(range(10, 100), range(10, 100)),
               lambda v: v["a"] + v["b"]),
        Family("lin1", "linear-equation", "solve x + b = c for x (x and b single digits)", LIN, _linear,
               lambda v: v["c"] - v["b"]),
    )
}


# What `galahad run` seeds and `galahad eval transfer` evaluates by default: `config.DEFAULT_FAMILIES`.
assert set(DEFAULT_FAMILIES) <= set(FAMILIES), "config.DEFAULT_FAMILIES names an unknown family"


def family(name: str) -> Family:
    """The family called `name`; GalahadError listing the known ones otherwise."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise GalahadError(f"unknown problem family {name!r} (known: {', '.join(FAMILIES)})") from None


def generate(family_name: str, n: int, seed: int = 0) -> list[Problem]:
    """`n` distinct problems of one family, the same for the same seed (sampled without replacement)."""
    fam = family(family_name)
    if n < 0:
        raise GalahadError(f"n must be >= 0, got {n}")
    space = [(values, k) for values in fam.params() for k in range(len(fam.templates))]
    if n > len(space):
        raise GalahadError(f"family {family_name!r} has only {len(space)} distinct problems, asked for {n}")
    rng = random.Random(f"{family_name}:{seed}")  # str seeds hash with SHA-512: stable across runs
    return [fam.problem(values, k) for values, k in rng.sample(space, n)]


def generate_all(n_per_family: int, seed: int = 0, names: tuple[str, ...] | None = None) -> list[Problem]:
    """`n_per_family` problems from each family (all of a smaller family), in family order."""
    out: list[Problem] = []
    for name in names or tuple(FAMILIES):
        out += generate(name, min(n_per_family, family(name).size()), seed)
    return out
