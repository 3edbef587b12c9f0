"""Canonical problem keys: the same mathematics in other words or notation gets the same key.

`canonical_key(text)` is `e:<tree>` for an expression to evaluate, `q:<A>x<+B>` for a one-unknown linear
equation, or None. The reader (reader.py: reader_lexer, reader_grammar, reader_meaning, reader_tree) is
SOUND by construction: every word is accounted for (an unknown word: no key), every parse of the Lark
Earley grammar is enumerated, and a text is keyed only when all of them give one key and a defined value
(division by zero, 0^0, irrational roots, values past the size bounds: no key). `value(text_or_key)` is the
exact `Fraction`; `reading(text)` the expression in plain math ("12 × 20"); `read(text)` all three.

Keys. An expression's key is its tree with `+`/`*` flattened and sorted, subtraction kept as `+(a,-(b))`,
division as `*(a,/(b))`, `-` on a literal folded into it (`-3`), numerals exact rationals; a division of
two literals that is no whole number is the rational it names (`2/6`, "two sixths" are `1/3`), a whole one
stays a division ("6/2" is `*(6,/(2))`), equal factors are a power (`5*5*5` is `^(5,3)`), "f of x" with a
unit fraction is x / d. Otherwise never evaluated: `2 + 2` and `3 + 1` differ. Other operations: `%(a,b)`
remainder, `_(a/b)` whole quotient, `~(x,unit)` rounding, `|(x)` absolute value, `m(...)` median. An
equation's key is the primitive integer form A*x + B = 0 (A > 0, gcd 1) of lhs - rhs. What is read and
what is refused: docs/problems.md ("Canonical keys").

`numbers(text)` is the multiset of numbers a problem mentions (number words included), the restriction
for the text-similarity fallback; `similarity` is that fallback's score. Torch-free, SQL-free.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from galahad.flywheel.problems import reader, reader_keys, reader_tree
from galahad.flywheel.problems.reader_keys import render_key
from galahad.flywheel.problems.reader_lexer import Refuse, tokens

# k1: the sympy reader; k2..k6: the hand-written recursive-descent reader (key_*.py). k7: the grammar
# reader (issue 49): every parse enumerated, every word accounted for, undefined values unkeyed. A stored
# key of an older version is recomputed (catalog.ensure_keys), so no key of a misread text survives. k8: no
# key for groupings writers disagree on (reader_doubt.py: "eight multiplied by three squared" had one in k7);
# no key of k7 changed, some are gone, new phrasings (money, comparisons) have one. k9: more money, comparison,
# percent and average phrasings have a key (pounds and euros, dollars and cents in words, bills, prices per
# unit, simple interest, "twice as much as", "what percent more", lists with spaces); k8 keys of money in cents
# or coins with no unit asked for ("3 dimes + 2 dimes", "25 cents times 8") and of counts of coins or bills that
# are no whole number ("how many quarters in $5.10") are gone. A stored problem is re-keyed by catalog.ensure_keys (new keys included).
# k10: "the difference between a and b" is |a - b|; more money frames (an amount off, the price of m when n cost q,
# split n ways, successive discounts), clock times without am/pm, numbers in words keyed; k9 keys of a command in
# mid-text ("3x+5=20 find x": k9 read 20x) and of "what is left when you divide" (k9: the quotient) are gone.
KEY_VERSION = "k10"
MAX_CHARS = reader.MAX_CHARS  # checked first: a longer text is no arithmetic one-liner, no key


@lru_cache(maxsize=4096)
def _read(text: str) -> tuple[str, Fraction] | None:
    return reader.key_and_value(text)


def reader_work(text: str) -> int | None:
    """The reader's deterministic work on a text: its token count (at most reader_lexer.MAX_TOKENS, each
    parse bounded by MAX_READINGS readings a node), or None when it stops before parsing (not a str,
    longer than MAX_CHARS, a character or word outside the lexicon, too many tokens)."""
    if not isinstance(text, str) or len(text) > MAX_CHARS:
        return None
    try:
        return len(tokens(text))
    except Refuse:
        return None


def canonical_key(text: str) -> str | None:
    """`e:<tree>` or `q:<form>` for a problem read soundly as a whole, else None. Same key = same math."""
    if not isinstance(text, str) or len(text) > MAX_CHARS:
        return None  # before the cache, so long texts are neither hashed nor kept
    got = _read(text)
    return None if got is None else got[0]


def key_value(k: str) -> Fraction | None:
    """The exact value an `e:` key denotes, or the solution a `q:` key denotes (None if out of bounds)."""
    if not isinstance(k, str):
        return None
    if k.startswith("q:"):
        return reader_keys.key_solution(k)
    tree = reader_keys.parse_key(k)
    return None if tree is None else reader_tree.value(tree)


def value(text_or_key: str) -> Fraction | None:
    """The exact answer of a problem text (or of a key from `canonical_key`), or None where the reader
    gives no key."""
    if not isinstance(text_or_key, str):
        return None
    if text_or_key.startswith(("e:", "q:")):
        v = key_value(text_or_key)
        if v is not None:
            return v
    got = _read(text_or_key) if len(text_or_key) <= MAX_CHARS else None
    return None if got is None else got[1]


@dataclass(frozen=True)
class Read:
    """What the reader made of a text: its key, the exact value and the expression in plain math."""

    key: str
    value: Fraction | None
    reading: str | None


def read(text: str) -> Read | None:
    """The text's key, value and plain reading, or None when it has no key."""
    k = canonical_key(text)
    return None if k is None else Read(k, key_value(k), render_key(k))


def reading(text: str) -> str | None:
    """The expression a text is read as, in plain math ("What is a score times a dozen?" -> "12 × 20 ×
    1^2"; an equation as "2x = 8"), or None when it has no key. A key string is accepted too."""
    if isinstance(text, str) and text.startswith(("e:", "q:")):
        got = render_key(text)
        if got is not None:
            return got
    return render_key(canonical_key(text))


# -- the similarity fallback's helpers (unchanged behaviour, except that `!` is no longer dropped) ------

_UNITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven",
          "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
_TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
WORD_VALUES = {w: i for i, w in enumerate(_UNITS)} | {w: 20 + 10 * i for i, w in enumerate(_TENS)}
_TENS_RE = "|".join(_TENS)
_WORD_RE = re.compile(rf"\b(?:({_TENS_RE})[- ]({'|'.join(_UNITS[1:10])})|({'|'.join(WORD_VALUES)}))\b")


def normalize(text: str) -> str:
    """Casefold, unify operator glyphs, spell number words as digits, trim a trailing `?`/`.`."""
    t = " ".join(text.casefold().split())
    t = (t.replace("\u00d7", "*").replace("\u22c5", "*").replace("\u00b7", "*").replace("\u00f7", "/")
         .replace("\u2212", "-").replace("\u2013", "-"))
    t = re.sub(r"(?<=\d)\s*x\s*(?=\d)", " * ", t)  # 3 x 4 (not the unknown x: digits on both sides)
    t = _WORD_RE.sub(lambda m: str(WORD_VALUES[m.group(1)] + WORD_VALUES[m.group(2)]) if m.group(1)
                     else str(WORD_VALUES[m.group(3)]), t)
    t = re.sub(r"\b(\d+) (plus|minus|times) (\d+)\b",
               lambda m: f"{m.group(1)} {dict(plus='+', minus='-', times='*')[m.group(2)]} {m.group(3)}", t)
    return t.strip().rstrip("?.").strip()


_SIGNED = re.compile(r"(?:(?<![\w).])-)?\d+(?:\.\d+)?")  # 7-3 is 7 and 3; a sign only where no operand precedes


def numbers(text: str) -> str:
    """The multiset of numbers in a problem, sorted and comma-joined ('' when there is none)."""
    found = _SIGNED.findall(normalize(text))
    return ",".join(sorted(found, key=lambda s: (float(s), s)))


def number_sequence(text: str) -> list[str]:
    return _SIGNED.findall(normalize(text))


def similarity(a: str, b: str) -> float:
    """Text similarity of two problems (normalized text, 0..1): the fallback for problems with no key."""
    return difflib.SequenceMatcher(None, normalize(a), normalize(b)).ratio()
