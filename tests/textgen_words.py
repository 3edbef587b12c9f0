"""Quantity phrases for the generated key-reader corpus (tests/textgen.py): whole numbers in digits and
words, negatives, fractions, mixed numbers, decimals, idioms (dozen, score, gross), money, LaTeX and units,
each rendered from its exact value. Written from English and school notation, never from the reader.

A leaf is `(form, payload, var)`: `var` seeds the stylistic choices (hyphens, "and", "a"/"one"), so the same
leaf always renders the same tokens. A token is `(text, kind, glue)`: kind "num" carries meaning, "ctx" is
meaningless where it stands ("and" in "three hundred and five"), "skip" is meaningless anywhere; glue means no
space before it."""

from __future__ import annotations

import random
from fractions import Fraction as F

ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen").split()
TENS = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()
DEN = {2: ("half", "halves"), 3: ("third", "thirds"), 4: ("quarter", "quarters"), 5: ("fifth", "fifths"),
       6: ("sixth", "sixths"), 7: ("seventh", "sevenths"), 8: ("eighth", "eighths"), 9: ("ninth", "ninths"),
       10: ("tenth", "tenths"), 12: ("twelfth", "twelfths")}
ORDINAL = {2: "second", 3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh", 8: "eighth",
           9: "ninth", 10: "tenth"}
IDIOM = {"dozen": 12, "score": 20, "gross": 144}
UNITS = {  # dimension -> (singular, plural, size in the dimension's smallest unit); exact factors only
    "length": [("inch", "inches", 1), ("foot", "feet", 12), ("yard", "yards", 36)],
    "metric": [("millimeter", "millimeters", 1), ("centimeter", "centimeters", 10),
               ("meter", "meters", 1000), ("kilometer", "kilometers", 1000000)],
    "time": [("second", "seconds", 1), ("minute", "minutes", 60), ("hour", "hours", 3600),
             ("day", "days", 86400), ("week", "weeks", 604800)],
    "mass": [("ounce", "ounces", 1), ("pound", "pounds", 16)],
    "grams": [("milligram", "milligrams", 1), ("gram", "grams", 1000), ("kilogram", "kilograms", 1000000)],
    "volume": [("cup", "cups", 1), ("pint", "pints", 2), ("quart", "quarts", 4), ("gallon", "gallons", 16)],
    "money": [("cent", "cents", 1), ("dollar", "dollars", 100)],
}


def T(s: str, kind: str = "num", glue: bool = False) -> tuple[str, str, bool]:
    return (s, kind, glue)


def _below100(n: int, r: random.Random) -> list:
    if n < 20:
        return [T(ONES[n])]
    t, o = divmod(n, 10)
    if o == 0:
        return [T(TENS[t])]
    return [T(f"{TENS[t]}-{ONES[o]}")] if r.random() < 0.85 else [T(TENS[t]), T(ONES[o])]


def _lead(n: int, r: random.Random) -> list:
    """The count before "hundred"/"thousand": "one" (or "a") there adds nothing ("hundred" alone is 100)."""
    if n == 1:
        return [T("a", "skip")] if r.random() < 0.25 else [T("one", "ctx")]
    return int_words(n, r)


def int_words(n: int, r: random.Random) -> list:
    if n < 0:
        return [T("negative")] + int_words(-n, r)
    if n < 100:
        return _below100(n, r)
    if n % 100 == 0 and n % 1000 and 1000 < n < 10000 and r.random() < 0.3:
        return _below100(n // 100, r) + [T("hundred")]  # "twelve hundred"
    big, word = (1000, "thousand") if n >= 1000 else (100, "hundred")
    head, rest = divmod(n, big)
    out = _lead(head, r) + [T(word)]
    if rest == 0:
        return out
    if rest < 100 and r.random() < 0.5:
        out.append(T("and", "ctx"))
    return out + int_words(rest, r)


def frac_words(n: int, d: int, r: random.Random) -> list:
    one, many = DEN[d]
    if d == 4 and r.random() < 0.4:
        one, many = "fourth", "fourths"
    if n == 1:
        return [T("a", "skip") if r.random() < 0.6 else T("one", "ctx"), T(one)]
    return int_words(n, r) + [T(many)]


def _dec_str(v: F) -> str:
    sign, v = ("-" if v < 0 else ""), abs(v)
    whole, frac = divmod(v, 1)
    digits = ""
    while frac:
        frac *= 10
        digits += str(int(frac))
        frac -= int(frac)
    return f"{sign}{whole}.{digits}" if digits else f"{sign}{whole}"


def render(leaf: tuple, r: random.Random | None = None) -> list:
    form, p, var = leaf
    r = r or random.Random(var)
    if form == "int":
        return [T(f"{p:,}" if abs(p) >= 1000 and r.random() < 0.3 else str(p))]
    if form == "words":
        return int_words(p, r)
    if form == "frac":  # (n, d), possibly negative n
        return [T(f"{p[0]}/{p[1]}")]
    if form == "fracw":
        return frac_words(p[0], p[1], r)
    if form == "mixed":
        return [T(str(p[0])), T(f"{p[1]}/{p[2]}")]
    if form == "mixedw":
        return int_words(p[0], r) + [T("and")] + frac_words(p[1], p[2], r)
    if form == "dec":
        s = _dec_str(p)
        return [T(s[1:] if s.startswith("0.") and r.random() < 0.25 else s)]
    if form == "decw":
        whole, _, digits = _dec_str(p).partition(".")
        head = [] if whole == "0" and r.random() < 0.3 else int_words(int(whole), r)
        return head + [T("point")] + [T(ONES[int(c)]) for c in digits]
    if form == "idiom":  # (count, unit): count 1, 2, 3 or 1/2 (half a dozen)
        count, unit = p
        if count == F(1, 2):
            return [T("half"), T("a", "skip"), T(unit)]
        lead = _lead(count, r) if count == 1 else int_words(count, r)
        return lead + [T(unit)]
    if form == "usd":  # whole cents, read as dollars
        d = F(p, 100)
        if r.random() < 0.6:
            return [T("$" + (str(int(d)) if d.denominator == 1 else f"{float(d):.2f}"))]
        amount = [T(str(int(d)) if d.denominator == 1 else f"{float(d):.2f}")] if r.random() < 0.7 \
            else int_words(int(d), r) if d.denominator == 1 else [T(f"{float(d):.2f}")]
        return amount + [T("dollar" if d == 1 else "dollars", "unit")]
    if form == "cent":
        amount = [T(str(p))] if r.random() < 0.6 else int_words(p, r)
        return amount + [T("cent" if p == 1 else "cents", "unit")]
    if form == "latex_frac":
        return [T(f"\\{r.choice(['frac', 'frac', 'dfrac'])}{{{p[0]}}}{{{p[1]}}}")]
    if form == "latex_mixed":
        return [T(str(p[0])), T(f"\\frac{{{p[1]}}}{{{p[2]}}}", glue=r.random() < 0.4)]
    raise ValueError(f"unknown leaf form {form}")


def leaf_value(leaf: tuple) -> tuple[F, str | None]:
    """The exact value and its money unit ("usd", "cent" or None)."""
    form, p, _ = leaf
    if form in ("int", "words"):
        return F(p), None
    if form in ("frac", "fracw", "latex_frac"):
        return F(p[0], p[1]), None
    if form in ("mixed", "mixedw", "latex_mixed"):
        return p[0] + F(p[1], p[2]), None
    if form in ("dec", "decw"):
        return F(p), None
    if form == "idiom":
        return F(p[0]) * IDIOM[p[1]], None
    if form == "usd":
        return F(p, 100), "usd"
    if form == "cent":
        return F(p), "cent"
    raise ValueError(form)


def neighbors(leaf: tuple) -> list[tuple]:
    """Leaves one number word (or one idiom word) away, for near misses; the caller keeps those whose
    tokens differ from the original in exactly one place."""
    form, p, var = leaf
    if form in ("words", "int"):
        cands = {p + 1, p - 1, p + 10, p - 10, p + 100, p + 1000, p * 2, -p}
        return [(form, c, var) for c in sorted(cands) if c != p and abs(c) < 1000000]
    if form == "idiom":
        out = [(form, (p[0], u), var) for u in IDIOM if u != p[1] and p[0] != F(1, 2)]
        return out + [(form, (c, p[1]), var) for c in (2, 3) if c != p[0] and p[0] != F(1, 2)]
    if form == "fracw":
        n, d = p
        return [(form, (n2, d2), var) for n2, d2 in ((n + 1, d), (n, d + 1), (n, d - 1))
                if 0 < n2 < d2 and d2 in DEN]
    if form == "mixedw":
        return [(form, (p[0] + 1, p[1], p[2]), var)]
    return []


def sample(form: str, rng: random.Random) -> tuple:
    """A leaf of this form with a seeded value: mostly small, sometimes large, now and then 0 or 1."""
    var = rng.randrange(1 << 30)
    roll = rng.random()
    n = 0 if roll < 0.03 else 1 if roll < 0.06 else rng.randint(2, 20) if roll < 0.7 \
        else rng.randint(21, 200) if roll < 0.9 else rng.randint(201, 5000)
    if form in ("int", "words"):
        return (form, -n if rng.random() < 0.08 else n, var)
    if form in ("frac", "fracw", "latex_frac"):
        d = rng.choice([2, 3, 4, 5, 6, 8, 10, 12])
        return (form, (rng.randint(1, d - 1), d), var)
    if form in ("mixed", "mixedw", "latex_mixed"):
        d = rng.choice([2, 3, 4, 5, 8])
        return (form, (rng.randint(1, 12), rng.randint(1, d - 1), d), var)
    if form in ("dec", "decw"):
        return (form, F(rng.randint(1, 999), rng.choice([10, 100, 1000])) + rng.choice([0, 0, 1, 2, 7]), var)
    if form == "idiom":
        return (form, rng.choice([(1, "dozen"), (1, "score"), (1, "gross"), (2, "dozen"), (3, "dozen"),
                                  (2, "score"), (F(1, 2), "dozen"), (3, "score"), (2, "gross")]), var)
    if form == "usd":
        return (form, rng.choice([rng.randint(1, 50) * 100, rng.randint(1, 4000), rng.randint(1, 20) * 25]), var)
    if form == "cent":
        return (form, rng.randint(1, 99), var)
    raise ValueError(form)
