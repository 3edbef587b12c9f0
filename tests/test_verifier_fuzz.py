"""Fuzzing the verifier with 10,000+ hostile and malformed inputs: no exception escapes, nothing hangs,
every verdict has a reason and the version. Derandomized, so CI runs the same inputs every time. Decided
on the verdicts, never on time: a hang guard far above the verifier's own 1 s limit only turns a hang into
a failure (the slowest check is printed, not asserted).

Two drivers share the budget: hypothesis's own strategies (structure-aware and shrinkable, but a few
milliseconds per input to draw) for 2,500 inputs, and hypothesis-drawn seeds that a cheap builder
turns into four hostile inputs each for 8,000 more."""

from __future__ import annotations

import random
import time

import pytest
from deadlines import returns
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from galahad.verifier.verifier import VERSION, Verifier

STRUCTURED = 2_500
SEEDS, PER_SEED = 2_000, 4

GOLDS = ["1", "0", "42", "-3", "\\frac{1}{2}", "x", "(1,2)", "\\{1,2\\}", "[0,\\infty)", "y = 2x + 3",
         "\\sqrt{2}", "\\text{Evelyn}", "10\\%", "1/2^{99}"]
PARTS = [
    "9^9^9^9", "10^{10^{10}}", "2^{99999}", "(10^{9999})^{9999}", "(" * 50, ")" * 50, "{" * 30, "}" * 30,
    "\\boxed{", "\\fbox{", "}", "{", "\\frac{", "\\sqrt{", "\\sqrt[", "!", "^", "_", "99999999999999999999",
    "\\left(", "\\right)", "$", "$$", "\\(", "\\)", "\\[", "\\]", "=", "<", "\\le", "\\text{", "\\%", "%",
    "\\infty", "\\", "\x00", "\ud800", "\u202e", "\n", "####", "Answer:", "The final answer is", "answer is",
    ",", ".", "-", "+", "*", "/", "e", "x", "i", "\\pi", "1/0", "0.000", "\\cup", "\\{", "\\}", "[", "]",
    "**", "\u221a", "\u2212", "\u221e", "\\begin{pmatrix}", "\\end{pmatrix}", "&", "\\\\", "cm", "\\circ",
    "\\$", "\\sum_{i=1}^{n}", "\\int", "\\lim", "\\log", "\\sin", "\\binom{", "\\mathbb{R}", "1e999", " ",
]
BIG = ["(", "\\boxed{", "9^", "{", "1", "1,", "$ ", "answer is ", "\\frac{1}{", "-", "x"]

pieces = st.one_of(st.sampled_from(PARTS), st.integers(-(10**30), 10**30).map(str), st.text(max_size=5))
hostile = st.lists(pieces, max_size=40).map("".join)
outputs = st.one_of(
    st.text(max_size=300),  # anything at all
    hostile,
    hostile.map(lambda s: f"\\boxed{{{s}}}"),
    hostile.map(lambda s: f"Let me think.\nThe answer is {s}."),
    st.builds(lambda part, n: part * n, st.sampled_from(BIG), st.integers(1_000, 40_000)),
    st.binary(max_size=200).map(lambda b: b.decode("utf-8", "surrogateescape")),
)
golds = st.one_of(st.sampled_from(GOLDS), st.sampled_from(GOLDS), st.sampled_from(GOLDS), hostile)


def build(rng: random.Random) -> str:
    """One hostile string from a seed: fragments, numbers, raw code points (surrogates too), floods."""
    roll = rng.random()
    if roll < 0.05:
        return rng.choice(BIG) * rng.randint(1_000, 40_000)
    if roll < 0.20:
        return "".join(chr(rng.randint(0, 0x10FFFF)) for _ in range(rng.randint(0, 60)))
    parts = [rng.choice(PARTS) if rng.random() < 0.75 else str(rng.randint(-(10**15), 10**15))
             for _ in range(rng.randint(0, 30))]
    body = "".join(parts)
    return rng.choice(["{}", "\\boxed{{{}}}", "The answer is {}.", "Answer: ${}$", "#### {}", "x = {}"]).format(body)


def _judge(verifier: Verifier, gold: str, output: str, seen: dict) -> None:
    start = time.monotonic()
    verdict = returns(verifier.check, gold, output)  # a hang guard only
    elapsed = time.monotonic() - start
    assert isinstance(verdict.verified, bool)
    assert isinstance(verdict.reason, str) and verdict.reason
    assert verdict.version == VERSION
    seen["n"] += 1
    seen["verified"] += verdict.verified
    seen["slowest"] = max(seen["slowest"], elapsed)


@pytest.mark.slow
def test_fuzz_never_raises_never_hangs():
    seen = {"n": 0, "verified": 0, "slowest": 0.0}
    budget = dict(deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    with Verifier() as verifier:
        verifier.warm()

        @settings(max_examples=STRUCTURED, **budget)
        @given(gold=golds, output=outputs)
        def structured(gold: str, output: str) -> None:
            _judge(verifier, gold, output, seen)

        @settings(max_examples=SEEDS, **budget)
        @given(seed=st.integers(0, 2**63))
        def seeded(seed: int) -> None:
            rng = random.Random(seed)
            for _ in range(PER_SEED):
                gold = rng.choice(GOLDS) if rng.random() < 0.8 else build(rng)
                _judge(verifier, gold, build(rng), seen)

        structured()
        seeded()
    print(f"\nfuzz: {seen['n']} inputs, {seen['verified']} verified, slowest {seen['slowest'] * 1000:.0f} ms")
    assert seen["n"] >= 10_000


@given(gold=st.sampled_from(GOLDS), tower=st.sampled_from(["9^9^9^9", "10^10^10", "2^{10^{100}}", "9^{9^{9^{9}}}"]),
       wrap=st.sampled_from(["\\boxed{%s}", "Answer: %s", "The final answer is $%s$."]))
@settings(max_examples=60, deadline=None, derandomize=True, database=None)
def test_power_towers_are_too_large_wherever_they_appear(gold, tower, wrap):
    with Verifier() as verifier:  # never reaches a worker: nothing is started
        verdict = verifier.check(gold, wrap % tower)
    assert not verdict.verified and verdict.reason.startswith("too large"), verdict.reason
