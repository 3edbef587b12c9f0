"""The key reader's tokens: which characters a keyable text may contain, how it splits into tokens, and how
English number words read as exact integers.

Owns: the character whitelist, `tokenize` (numbers as exact `Fraction`s from their digits, with a digit
bound, `.5` included where a number may start; words; symbols, with glyphs unified but `÷` kept apart
from `/`), `number_words` (cardinals up to the billions, every valid prefix of a run of number words),
`fraction_words` ("three quarters", "a half") and `point_digits` ("point two five"). Everything here
refuses (raises `Refuse`) rather than guesses: a comma between digits that is not strict thousands
grouping, `3.4.5`, `3..5`, `3 .5`, a literal of more than `MAX_DIGITS` digits, more than `MAX_TOKENS`
tokens, a character outside the whitelist (lone surrogates and NUL included).
Pure, stdlib-only, linear in the text's length.
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import NamedTuple

MAX_DIGITS = 30  # digits in one numeric literal (a longer one is no school arithmetic: no key)
MAX_TOKENS = 120

# ASCII printable, whitespace, and a few math glyphs; anything else (lone surrogates, NUL, emoji, ...) -> no key
_ALLOWED = re.compile(r"[\x20-\x7e\t\n\r\u00d7\u00f7\u00b7\u22c5\u2212\u2013\u00b2\u00b3\u2019"
                      r"\u221a\u221b\u221c\u2074\u00bc\u00bd\u00be\u2153-\u215e]*")
_GLYPHS = {"\u00d7": "*", "\u00b7": "*", "\u22c5": "*", "\u2212": "-", "\u2013": "-", "**": "^", "\u2019": "'"}
# "\u00f7" (division sign) stays its own token: it divides like `/`, but next to a `/` fraction ("6 \u00f7 2/3")
# writers mean different things, and the grammar must be able to tell the two apart
_TOKEN = re.compile(
    r"(?P<num>[0-9]+(?:,[0-9]{3}(?![0-9]))*(?:\.[0-9]+)?)"
    r"|(?P<dot>\.[0-9]+)"  # a leading-dot decimal `.5` (where it may stand, see tokenize)
    r"|(?P<word>[a-z]+(?:'[a-z]+)?(?:-[a-z]+)*)"
    r"|(?P<sym>\*\*|//|[^\sa-z0-9])"
    r"|(?P<space>\s+)")
_ORDINAL_SUFFIX = {"st", "nd", "rd", "th"}
_DIGITS = "0123456789"
_BEFORE_DOT = set(" \t\n\r+-*/^(=:\u00d7\u00f7\u00b7\u22c5\u2212\u2013")  # what may precede a leading-dot `.5`


class Refuse(Exception):
    """The text is outside what the key reader reads soundly: it gets no key."""


class Tok(NamedTuple):
    kind: str  # "num" | "word" | "sym" | "ord"
    text: str
    value: Fraction | None  # a number's (or ordinal's) exact value
    sp: bool  # whitespace (or the text's start) right before this token


def admissible(text: str) -> bool:
    return _ALLOWED.fullmatch(text) is not None


# -- notation rewritten before tokenizing: LaTeX, vulgar fractions, root glyphs ----------------------------

_VULGAR = {"\u00bd": "1/2", "\u2153": "1/3", "\u2154": "2/3", "\u00bc": "1/4", "\u00be": "3/4", "\u2155": "1/5",
           "\u2156": "2/5", "\u2157": "3/5", "\u2158": "4/5", "\u2159": "1/6", "\u215a": "5/6", "\u215b": "1/8",
           "\u215c": "3/8", "\u215d": "5/8", "\u215e": "7/8"}
_VULGAR_RE = re.compile(r"(\d?)([" + "".join(_VULGAR) + r"])(?=(.?))")
_ROOT_INDEX = {"2": "\u221a", "3": "\u221b", "4": "\u221c"}
_TEX_WORDS = {"cdot": "*", "times": "*", "div": "\u00f7", "left": "", "right": "", "%": "%", ",": " ",
              ";": " ", "!": "", " ": " ", ":": " ", "quad": " ", "qquad": " ", "pi": None}
_MATH_DOLLARS = re.compile(r"\$([^$\s](?:[^$]*[^$\s])?)\$")  # $7^{3}$; never "$4 and $5" (a space inside)


def _group(text: str, i: int) -> tuple[str, int]:
    """The content of the brace group at text[i] ('{') and the index after it; Refuse when unbalanced."""
    if i >= len(text) or text[i] != "{":
        raise Refuse("latex: no group")
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[i + 1:j], j + 1
    raise Refuse("latex: unbalanced")


def _detex(text: str) -> str:
    """LaTeX as the reader's notation: \\frac{a}{b} is ((a)/(b)) (a digit right before it makes a mixed
    number, digits only: 6\\frac{1}{2} is 6 1/2), \\sqrt{x} and \\sqrt[3]{x} are roots, \\cdot and \\times
    are *, \\div is \u00f7, \\left( \\right) and spacing commands drop, braces group. Any other command: Refuse."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == "{":
            inner, i = _group(text, i)
            out.append("(" + _detex(inner) + ")")
        elif c == "}":
            raise Refuse("latex: unbalanced")
        elif c != "\\":
            out.append(c)
            i += 1
        else:
            m = re.match(r"[a-z]+|.", text[i + 1:])
            if m is None:
                raise Refuse("latex: lone backslash")
            cmd, i = m.group(), i + 1 + m.end()
            if cmd in ("frac", "dfrac", "tfrac"):
                a, i = _group(text, i)
                b, i = _group(text, i)
                a, b = _detex(a).strip(), _detex(b).strip()
                if out and out[-1][-1:].isdigit():  # 6\frac{1}{2}: a mixed number, or nothing
                    if not (a.isdigit() and b.isdigit()):
                        raise Refuse("latex: mixed number")
                    out.append(f" {a}/{b}")
                elif a.isdigit() and b.isdigit():
                    out.append(f"({a}/{b})")
                else:
                    out.append(f"(({a})/({b}))")
            elif cmd == "sqrt":
                index = "2"
                if i < n and text[i] == "[":
                    j = text.find("]", i)
                    index, i = (text[i + 1:j].strip(), j + 1) if j > 0 else ("", i)
                if index not in _ROOT_INDEX:
                    raise Refuse("latex: root index")
                x, i = _group(text, i)
                out.append(f"{_ROOT_INDEX[index]}({_detex(x)})")
            elif _TEX_WORDS.get(cmd) is not None:
                out.append(_TEX_WORDS[cmd] if cmd not in ("left", "right") else "")
            else:
                raise Refuse("latex: unknown command")
    return "".join(out)


def rewrite(text: str) -> str:
    """Notation the tokenizer reads, from a lower-cased whitelisted text: math `$...$` delimiters drop
    (`$7^{3}$`; a currency `$4` stays, see key_units), LaTeX (see _detex), a vulgar fraction is its digits
    (`\u215e` is 7/8, `2\u215e` the mixed number 2 7/8), `\u2074\u221a` is the fourth root `\u221c`, `\u00b3\u221a` `\u221b`.
    Refuses (no key) what it cannot rewrite soundly."""
    if "$" in text:
        text = _MATH_DOLLARS.sub(lambda m: m.group(1), text)
    if "\\" in text or "{" in text or "}" in text:
        text = _detex(text)
    if any(v in text for v in _VULGAR):
        def frac(m):
            if m.group(3) and (m.group(3).isalnum() or m.group(3) in "/^("):
                raise Refuse("vulgar fraction glued to what follows")
            return (m.group(1) + " " if m.group(1) else "") + _VULGAR[m.group(2)]
        text = _VULGAR_RE.sub(frac, text)
    text = text.replace("\u2074\u221a", "\u221c").replace("\u00b3\u221a", "\u221b").replace("\u00b2\u221a", "\u221a")
    if "\u2074" in text:
        raise Refuse("superscript four")
    return text


def _ordinal_ok(n: int, suffix: str) -> bool:
    if n % 100 in (11, 12, 13):
        return suffix == "th"
    return suffix == {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def tokenize(text: str) -> list[Tok]:
    """Tokens of a lower-cased, whitelisted text (the caller checks length and characters first)."""
    toks: list[Tok] = []
    pos, sp, n = 0, True, len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:  # cannot happen for whitelisted text, but never loop
            raise Refuse("untokenizable")
        pos = m.end()
        kind = m.lastgroup
        s = m.group()
        if kind == "space":
            sp = True
            continue
        if kind == "dot":  # .5 after a space, an operator or the start: 0.5; anywhere else (3..5, x.5) refused
            if (m.start() > 0 and text[m.start() - 1] not in _BEFORE_DOT) or (toks and toks[-1].kind == "num"):
                raise Refuse("malformed number")  # 3 .5 is no number either
            kind, s = "num", "0" + s
        if kind == "num":
            digits = s.replace(",", "").replace(".", "")
            if len(digits) > MAX_DIGITS:
                raise Refuse("literal too long")
            if pos < n and (text[pos] in _DIGITS or (text[pos] in ",." and pos + 1 < n and text[pos + 1] in _DIGITS)):
                raise Refuse("malformed number")  # 1,2345  3.4.5  1,2
            whole, _, frac = s.replace(",", "").partition(".")
            value = Fraction(int(whole)) + (Fraction(int(frac), 10 ** len(frac)) if frac else 0)
            toks.append(Tok("num", s, value, sp))
        elif kind == "word":
            prev = toks[-1] if toks else None
            if (prev is not None and prev.kind == "num" and not sp and s in _ORDINAL_SUFFIX
                    and "." not in prev.text and "," not in prev.text):
                if not _ordinal_ok(int(prev.text), s):
                    raise Refuse("bad ordinal")
                toks[-1] = Tok("ord", prev.text + s, prev.value, prev.sp)
            else:
                toks.append(Tok("word", s, None, sp))
        else:
            toks.append(Tok("sym", _GLYPHS.get(s, s), None, sp))
        sp = False
        if len(toks) > MAX_TOKENS:
            raise Refuse("too many tokens")
    return toks


# -- number words --------------------------------------------------------------------------------------

UNITS = {w: i for i, w in enumerate(("zero", "one", "two", "three", "four", "five", "six", "seven", "eight",
                                     "nine"))}
TEENS = {w: 10 + i for i, w in enumerate(("ten", "eleven", "twelve", "thirteen", "fourteen", "fifteen",
                                          "sixteen", "seventeen", "eighteen", "nineteen"))}
TENS = {w: 20 + 10 * i for i, w in enumerate(("twenty", "thirty", "forty", "fifty", "sixty", "seventy",
                                              "eighty", "ninety"))}
SCALES = (("billion", 10 ** 9), ("million", 10 ** 6), ("thousand", 10 ** 3))
ORDINAL_WORDS = {"zeroth": 0, "first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
                 "ninth": 9, "tenth": 10}
NUMBER_WORDS = set(UNITS) | set(TEENS) | set(TENS) | {"hundred", "and", "a"} | {s for s, _ in SCALES}


def _word(toks: list[Tok], i: int) -> str | None:
    return toks[i].text if i < len(toks) and toks[i].kind == "word" else None


def _below100(toks: list[Tok], i: int) -> list[tuple[int, int]]:
    """(end, value) for 1..99 read at i: 'seven', 'fifteen', 'forty', 'forty-two', 'forty two'."""
    w = _word(toks, i)
    if w is None:
        return []
    if w in UNITS and w != "zero":
        return [(i + 1, UNITS[w])]
    if w in TEENS:
        return [(i + 1, TEENS[w])]
    if w in TENS:
        out = [(i + 1, TENS[w])]
        u = _word(toks, i + 1)
        if u in UNITS and u != "zero":
            out.append((i + 2, TENS[w] + UNITS[u]))
        return out
    tens, _, unit = w.partition("-")
    if tens in TENS and unit in UNITS and unit != "zero" and "-" not in unit:
        return [(i + 1, TENS[tens] + UNITS[unit])]
    return []  # twenty-ten, forty-zero, ...


def _below1000(toks: list[Tok], i: int) -> list[tuple[int, int]]:
    """(end, value) for 1..999: below100, or '(a|one..nine) hundred [and] [below100]'."""
    out = _below100(toks, i)
    w = _word(toks, i)
    lead = 1 if w == "a" else UNITS.get(w, 0) if w != "zero" else 0
    if lead and _word(toks, i + 1) == "hundred":
        h = 100 * lead
        out.append((i + 2, h))
        j = i + 3 if _word(toks, i + 2) == "and" else i + 2
        out += [(e, h + v) for e, v in _below100(toks, j)]
    return out


def number_words(toks: list[Tok], i: int) -> list[tuple[int, int]]:
    """Every (end, value) where toks[i:end] is a whole cardinal in words ('zero', 'a thousand',
    'three thousand two hundred and five', 'one million and one'). Scales strictly decrease; 'and' only
    before the final part below 100; 'a' only as the first multiplier."""
    if _word(toks, i) == "zero":
        return [(i + 1, 0)]
    results: list[tuple[int, int]] = []
    # state: (position, total so far, index of the next allowed scale, whether a part was read)
    frontier = [(i, 0, 0, True)]
    while frontier:
        nxt = []
        for pos, total, scale_from, first in frontier:
            if first and _word(toks, pos) == "a" and _word(toks, pos + 1) in {s for s, _ in SCALES}:
                groups = [(pos + 1, 1)]
            elif first:
                groups = _below1000(toks, pos)
            else:
                j = pos + 1 if _word(toks, pos) == "and" else pos
                groups = [(e, v) for e, v in _below1000(toks, j) if j == pos or v < 100]
                if j != pos:  # 'and' ends the number: only a final part below 100
                    results += [(e, total + v) for e, v in groups]
                    continue
            for end, v in groups:
                if end != pos + 1 or _word(toks, pos) != "a":
                    results.append((end, total + v))
                for k in range(scale_from, len(SCALES)):
                    name, mult = SCALES[k]
                    if _word(toks, end) == name:
                        results.append((end + 1, total + v * mult))
                        nxt.append((end + 1, total + v * mult, k + 1, False))
        frontier = nxt
    return sorted(set(results))


# -- fractions and decimals in words -------------------------------------------------------------------

_DENOMS = {"half": 2, "third": 3, "quarter": 4, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7, "eighth": 8,
           "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12}  # never "second": "two seconds" is time
DENOMS_SINGULAR = dict(_DENOMS)
DENOMS_PLURAL = {("halves" if w == "half" else w + "s"): d for w, d in _DENOMS.items()}
_NUMERATORS = {w: v for w, v in (UNITS | TEENS).items() if v >= 2}


def _fraction_parts(num: str, den: str) -> tuple[int, int] | None:
    if num in ("a", "one"):
        d = DENOMS_SINGULAR.get(den)
        return None if d is None else (1, d)
    n, d = _NUMERATORS.get(num), DENOMS_PLURAL.get(den)
    return None if n is None or d is None else (n, d)


def fraction_words(toks: list[Tok], i: int) -> list[tuple[int, int, int]]:
    """(end, numerator, denominator) for a fraction said in words at i: 'one half', 'a half', 'a quarter',
    'three quarters', 'two thirds', 'seven eighths', 'two-thirds'. Singular after 'a'/'one' only, plural
    after two..nineteen only ('two third', 'one thirds' and 'two seconds' are no fractions)."""
    w = _word(toks, i)
    if w is None:
        return []
    if "-" in w:  # one-half, two-thirds, three-quarters
        num, _, den = w.partition("-")
        got = _fraction_parts(num, den) if num != "a" and "-" not in den else None
        return [] if got is None else [(i + 1, *got)]
    den = _word(toks, i + 1)
    got = None if den is None else _fraction_parts(w, den)
    return [] if got is None else [(i + 2, *got)]


def point_digits(toks: list[Tok], i: int) -> tuple[int, Fraction] | None:
    """(end, fractional part) for 'point' followed by digit words at i ('point two five' is 0.25): every
    following digit word is taken ('three point two five' is never 3.2 and then a five). None when there
    is no 'point' or no digit word after it ('three point twenty five' is no number)."""
    if _word(toks, i) != "point":
        return None
    j, digits = i + 1, ""
    while _word(toks, j) in UNITS:
        digits += str(UNITS[_word(toks, j)])
        j += 1
    if not digits or len(digits) > MAX_DIGITS:
        return None
    return j, Fraction(int(digits), 10 ** len(digits))
