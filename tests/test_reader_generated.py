"""The key reader against a corpus generated without reading it (issue 49 items 6 and 2; tests/textgen.py).

For every generated text the reader keys: `value(text)` is the generator's exact value (0 wrong values), an
undefined or ambiguous text is never keyed, and no key is shared by texts whose values differ (0 joins).
Quick tier: a fixed seeded sample of 2,000 texts, and the word properties on keyed texts of it (an operator
word replaced by another with another value changes or removes the key; a meaningful word deleted changes
or removes it; an unknown word in an operator's place removes it; a text and its negation never share a
key). Slow tier: >= 100,000 texts. Coverage (keyed / texts with a value, by phrase class) is printed."""

from __future__ import annotations

import pytest
import textgen
import textgen_check as C

QUICK_N, QUICK_SEED = 2000, 4901
SLOW_N, SLOW_SEED = 100_000, 4902


def _coverage(items, got) -> str:
    return "coverage (keyed / texts with a value):\n" + "\n".join(
        f"  {k:28s} {a}/{b}" for k, (a, b) in C.coverage(items, got).items())


@pytest.fixture(scope="module")
def quick():
    corpus = textgen.generate(QUICK_N, QUICK_SEED)
    items = list(corpus.items.values())
    return corpus, items, C.read([it.text for it in items])


def test_generated_sample_is_read_soundly(quick):
    corpus, items, got = quick
    assert len(items) >= QUICK_N and not corpus.conflicts
    print(_coverage(items, got))
    fails = C.failures(items, got)
    assert not fails, "the reader disagrees with the generated values:\n" + C.report(fails)


def test_word_properties_on_keyed_texts(quick):
    _, items, got = quick
    sample = C.property_sample(items, 250, QUICK_SEED)
    keyed = sum(got[it.text][0] is not None for it in sample)
    assert keyed >= 50, f"only {keyed} of {len(sample)} sampled texts keyed: the properties would check little"
    fails = C.property_failures(sample, got)
    assert not fails, f"word properties fail on {keyed} keyed texts:\n" + C.report(fails)


@pytest.mark.slow
def test_generated_corpus_is_read_soundly():
    corpus = textgen.generate(SLOW_N, SLOW_SEED)
    items = list(corpus.items.values())
    assert len(items) >= SLOW_N and not corpus.conflicts
    got = C.read([it.text for it in items])
    print(_coverage(items, got))
    fails = C.failures(items, got)
    assert not fails, f"the reader disagrees with the generated values on {len(items)} texts:\n" + C.report(fails)
