"""The reader's per-text parser (reader_grammar.parser_for: the grammar's rules that use only the text's terminals,
without the word tier's copy of the symbol rules when the text has no word operator) gives exactly the readings
of the whole grammar's parser, on every text of a corpus: the held-out dev phrasings, a seeded generated sample
and the project's problem families. A cost measure (issue 49) may never change what a text is read as."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import textgen
from lark.exceptions import LarkError

from galahad.flywheel.problems import families
from galahad.flywheel.problems.reader_grammar import parser, parser_for
from galahad.flywheel.problems.reader_lexer import Refuse, tokens
from galahad.flywheel.problems.reader_meaning import readings

DEV = Path(__file__).resolve().parents[1] / "bench" / "data" / "keys_heldout" / "dev.jsonl"


def _corpus() -> list[str]:
    texts = [json.loads(line)["text"] for line in DEV.read_text().splitlines() if line.strip()]
    texts += [it.text for it in list(textgen.generate(600, 4903).items.values())]
    texts += [p.problem for p in families.generate_all(20, seed=5)]
    texts += ["Calculate -5 * (3 + 2) - 7.", "What is 12 + 7 * 3?", "8 / 2 * 4", "3 - 4 - 5 + 6 * 2 / 3",
              "what is 2 plus 3 * 4", "5 times 3 + 2", "((1 + 2) * (3 - 4)) / 5", "2^3^2", "-3^2 + 4"]
    return texts


def _read(make, toks):
    try:
        return readings(make().parse(toks))
    except (Refuse, LarkError, ArithmeticError, ValueError, TypeError, AttributeError):
        return "no reading"  # the reader keys nothing either way


def _check(texts: list[str]) -> None:
    full, checked = parser(), 0
    for text in texts:
        try:
            toks = tokens(text)
        except Refuse:
            continue
        if not toks:
            continue
        fast = _read(lambda: parser_for(frozenset(t.type for t in toks)), toks)  # noqa: B023 (called at once)
        whole = _read(lambda: full, toks)
        assert fast == whole, text
        checked += 1
    assert checked > len(texts) // 3


def test_parser_for_reads_as_the_whole_grammar_sample() -> None:
    """Quick tier: every 12th text of the corpus (the whole grammar's parser costs ~0.1 s a text)."""
    _check(_corpus()[::12])


@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(4))
def test_parser_for_reads_as_the_whole_grammar(chunk: int) -> None:
    _check(_corpus()[chunk::4])
