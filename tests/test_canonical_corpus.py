"""Canonical keys on public generators: about 6,000 reasoning_gym problems plus the built-in families.

No key may be shared by two problems whose answers differ, and wherever a key exists its exact value must
be the generator's answer. One known exception is the generator's, not the reader's: basic_arithmetic
computes its answers with floor division (`eval(expr.replace("/", "//"))`) and a few of its divisions are
inexact; for those the test checks that the answer is the floor-division value and that the true value
(what `/` means) differs, and leaves them out of the answer-collision check. Coverage is printed
(`pytest -s`) and bounded below on the generators whose phrasings the reader supports.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

import pytest

from galahad.flywheel.problems import canonical, families

rg = pytest.importorskip("reasoning_gym")

SUPPORTED = [  # (dataset, config, size): phrasings the reader is meant to cover
    ("basic_arithmetic", {}, 900),
    ("basic_arithmetic", {"format_style": "natural"}, 700),
    ("basic_arithmetic", {"format_style": "natural", "whitespace": "no_space"}, 500),
    ("basic_arithmetic", {"whitespace": "random"}, 500),
    ("simple_equations", {}, 900),
    ("chain_sum", {}, 600),
    ("decimal_chain_sum", {}, 600),
    ("products", {}, 500),
]
REFUSED_BY_DESIGN = [  # rounding / format instructions, gcd, complex numbers, hex: no key is right
    ("decimal_arithmetic", {}, 200), ("power_function", {}, 150), ("fraction_simplification", {}, 100),
    ("gcd", {}, 100), ("lcm", {}, 100), ("complex_arithmetic", {}, 100), ("bitwise_arithmetic", {}, 50),
]
_FLOOR_EXPR = re.compile(r"[0-9+\-*/() ]+")


def _answer(text: str) -> Fraction | None:
    try:
        return Fraction(Decimal(text.strip()))
    except (InvalidOperation, ValueError):
        return None


def _floor_value(expr: str) -> int:
    assert _FLOOR_EXPR.fullmatch(expr), expr  # generator output: digits, operators, brackets only
    return eval(compile(expr.replace("/", "//"), "<generator>", "eval"), {"__builtins__": {}})  # noqa: S307


@pytest.fixture(scope="module")
def corpus():
    rows = []
    for group, specs in (("supported", SUPPORTED), ("refused", REFUSED_BY_DESIGN)):
        for name, cfg, size in specs:
            for item in rg.create_dataset(name, size=size, seed=20261201, **cfg):
                rows.append({"group": group, "source": name, "question": item["question"],
                             "answer": item["answer"], "meta": item.get("metadata", {}),
                             "key": canonical.canonical_key(item["question"])})
    for p in families.generate_all(200, seed=5):
        rows.append({"group": "builtin", "source": p.template, "question": p.problem, "answer": p.answer,
                     "meta": {}, "key": canonical.canonical_key(p.problem)})
    return rows


def test_corpus_size(corpus):
    assert len([r for r in corpus if r["group"] != "builtin"]) >= 6000


def test_a_key_value_is_the_generators_answer(corpus):
    floor_cases, wrong = [], []
    for r in corpus:
        if r["key"] is None:
            continue
        v, gold = canonical.value(r["key"]), _answer(r["answer"])
        if v == gold:
            continue
        expr = r["meta"].get("expression", "")
        if r["source"] == "basic_arithmetic" and "/" in expr and gold == _floor_value(expr) and v != gold:
            floor_cases.append(r["question"])
            r["floor"] = True
            continue
        wrong.append((r["question"], r["answer"], v))
    assert wrong == []
    print(f"\nbasic_arithmetic answers computed by floor division (inexact '/'): {len(floor_cases)}")
    assert len(floor_cases) < 0.05 * len(corpus)


def test_no_key_is_shared_by_problems_whose_answers_differ(corpus):
    by_key: dict[str, set] = {}
    for r in corpus:
        if r["key"] is not None and not r.get("floor"):
            by_key.setdefault(r["key"], set()).add(_answer(r["answer"]))
    collisions = {k: v for k, v in by_key.items() if len(v) > 1}
    assert collisions == {}
    # and by the exact value of each text (floor-division items included)
    by_value: dict[str, set] = {}
    for r in corpus:
        if r["key"] is not None:
            by_value.setdefault(r["key"], set()).add(canonical.value(r["question"]))
    assert all(len(v) == 1 for v in by_value.values())


def test_coverage(corpus):
    report = {}
    for r in corpus:
        got = report.setdefault((r["group"], r["source"] if r["group"] != "builtin" else "builtin"), [0, 0])
        got[0] += r["key"] is not None
        got[1] += 1
    print()
    for (group, source), (k, n) in sorted(report.items()):
        print(f"  {group:9} {source:24} {k:5}/{n:<5} {100 * k / n:6.1f}%")
    supported = [r for r in corpus if r["group"] in ("supported", "builtin")]
    share = sum(r["key"] is not None for r in supported) / len(supported)
    print(f"  coverage on supported generators: {100 * share:.2f}%")
    assert share >= 0.98
    assert all(r["key"] is not None for r in corpus if r["group"] == "builtin")
    refused = [r for r in corpus if r["group"] == "refused"]
    assert all(r["key"] is None for r in refused), [r["question"] for r in refused if r["key"]][:3]


def test_normal_problems_stay_far_below_the_work_bound(corpus):
    """The token bound (reader_lexer.MAX_TOKENS) refuses hostile texts; every generator problem stays well
    under it, so lowering it never costs coverage silently (deterministic: tokens, not time)."""
    from galahad.flywheel.problems import reader_lexer

    work = max(canonical.reader_work(r["question"]) or 0 for r in corpus if r["group"] != "refused")
    print(f"\nmost tokens in a generator problem: {work} (bound {reader_lexer.MAX_TOKENS})")
    assert work <= reader_lexer.MAX_TOKENS * 3 // 4
