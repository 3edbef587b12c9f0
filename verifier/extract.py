"""Finding the final answer in a model's output (and in a gold field), as a string.

Order of trust: the last `\\boxed{}`; then the last "final answer is" / "answer is" / "Answer:" / "####"
anchor; then a math block, or a tuple of numbers, that ends the text; then the last plain number. A caller
that lets a base model run on into the next example must cut the output first. Every scan is linear in the
input, so a hostile 100 KB output cannot stall the caller.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

from galahad.verifier.normalize import split_unit

BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
# "**Answer:** 42" (markdown) and "#### 42" (GSM8K) are anchors too.
ANCHOR = re.compile(
    r"(?:(?:final\s+)?answer\s*(?:\*\*)?\s*(?:is|:|=)|####)\s*:?\s*(?:\*\*)?\s*", re.IGNORECASE
)
# A plain number that is not part of a power, a product, a word or a longer decimal: "x = -3." gives
# "-3", while "2^3" gives nothing (the 3 is an exponent, not an answer).
LAST_NUMBER = re.compile(
    r"(?<![\w.^/*)\]}\\])[-\u2212]?\d+(?:,\d{3})*(?:\.\d+)?(?:/\d+)?(?![\w^/*(\[{])(?!\.\d)(?!,\d)"
)
SENTENCE_END = re.compile(r"\.(?:\s|$)|[;\n]|,\s+(?:so|because|since|which|as|and)\b|\s+(?:because|since)\b")
MATH_BLOCK_END = re.compile(r"(\$\$?|\\\)|\\\])[\s.,;!]*$")
TRAILING_TUPLE = re.compile(r"([(\[][-+\d\s,./]*[)\]])[\s.,;!]*$")


@dataclass(frozen=True)
class Extraction:
    """An answer string and how it was found (`boxed`, `anchor`, `math`, `tuple` or `number`)."""

    answer: str
    how: str


def braced(text: str, open_at: int) -> str | None:
    """The contents of the `{...}` group whose `{` is at `open_at`, or None when it never closes."""
    depth = 0
    for i in range(open_at, len(text)):
        c = text[i]
        if c == "\\" and i + 1 < len(text) and text[i + 1] in "{}":
            continue
        if c == "{" and (i == 0 or text[i - 1] != "\\"):
            depth += 1
        elif c == "}" and (i == 0 or text[i - 1] != "\\"):
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : i]
    return None


def last_boxed(text: str) -> str | None:
    """The contents of the last closed `\\boxed{...}` (or `\\fbox{...}`). One pass over the text:
    trying each `\\boxed{` with its own scan would be quadratic on `\\boxed{` repeated 20,000 times."""
    starts = {m.end() - 1 for m in BOXED.finditer(text)}
    if not starts:
        return None
    stack: list[int] = []
    best: tuple[int, int] | None = None
    for i, c in enumerate(text):
        if c not in "{}" or (i > 0 and text[i - 1] == "\\"):
            continue
        if c == "{":
            stack.append(i)
        elif stack:
            j = stack.pop()
            if j in starts and (best is None or j > best[0]):
                best = (j, i)
    return text[best[0] + 1 : best[1]] if best else None


def _after_anchor(rest: str) -> str:
    rest = rest.lstrip()
    # A math block right after the anchor is the answer, whatever prose follows it.
    for opener, closer in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if rest.startswith(opener):
            end = rest.find(closer, len(opener))
            if end > len(opener):
                return rest[: end + len(closer)]
            break
    m = SENTENCE_END.search(rest)
    return rest[: m.start()] if m else rest


def unwrap(answer: str) -> str:
    """Strip the delimiters that only say "this is math" or "this is the answer" around a string."""
    s = answer.strip()
    for _ in range(8):
        before = s
        s = s.strip().rstrip(".;,").strip()
        for opener, closer in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"), ("**", "**"), ("`", "`")):
            if len(s) >= len(opener) + len(closer) and s.startswith(opener) and s.endswith(closer):
                s = s[len(opener) : len(s) - len(closer)].strip()
        m = BOXED.match(s)
        if m:
            inner = braced(s, m.end() - 1)
            if inner is not None and len(inner) + m.end() + 1 == len(s):
                s = inner.strip()
        if s == before:
            break
    return s


def extract_answer(output: str) -> Extraction | None:
    """The final answer a model gave in `output`, or None when it gave none that can be found."""
    boxed = last_boxed(output)
    if boxed is not None:
        return Extraction(unwrap(boxed), "boxed") if unwrap(boxed) else None
    anchors = list(ANCHOR.finditer(output))
    if anchors:
        answer = unwrap(_after_anchor(output[anchors[-1].end() :]))
        if answer:
            return Extraction(answer, "anchor")
    tail = output.rstrip()
    m = MATH_BLOCK_END.search(tail)
    if m:
        closer = m.group(1)
        opener = {"$": "$", "$$": "$$", "\\)": "\\(", "\\]": "\\["}[closer]
        start = tail.rfind(opener, 0, m.start())
        if start >= 0:
            answer = unwrap(tail[start : m.end()])
            if answer:
                return Extraction(answer, "math")
    m = TRAILING_TUPLE.search(tail[-200:])
    if m and "," in m.group(1):
        return Extraction(m.group(1), "tuple")
    last = deque(LAST_NUMBER.finditer(output), maxlen=1)
    if last:
        # The number keeps what follows it up to the end of its sentence, as an anchored answer does,
        # so that "10%", "10 cm" or "5 apples" reach the unit check instead of passing as a bare 10 or 5.
        number = last[0].group(0).replace("\u2212", "-")
        rest = output[last[0].end() : last[0].end() + 80]
        end = SENTENCE_END.search(rest)
        with_unit = unwrap(number + (rest[: end.start()] if end else rest))
        value, unit = split_unit(with_unit)
        return Extraction(with_unit if unit and value == number else number, "number")
    return None


def extract_gold(gold: str) -> str:
    """The answer inside a gold field: a bare answer, a `\\boxed{}` solution or a GSM8K `#### n` one."""
    if "####" in gold:
        return unwrap(gold.rsplit("####", 1)[1])
    boxed = last_boxed(gold)
    return unwrap(boxed if boxed is not None else gold)
