"""A seeded generator of math question texts with their exact values (issue 49 item 6), written from English
and school notation, independently of the key reader's grammar.

`generate(n, seed)` composes quantity phrases (tests/textgen_words.py) with operator phrasings and question
frames (tests/textgen_phrases.py) at depth 1-2 and returns `Item`s: the text, `status` ("ok", "undefined":
no defined rational value, "ambiguous": English gives readings with different values, so no reader may key
it) and `values` (the acceptable exact values, or the readings of an ambiguous text). Near misses are
single-word substitutions (`near_misses`), each with its own recomputed value."""

from __future__ import annotations

import random
from dataclasses import dataclass
from fractions import Fraction as F

import textgen_words as W
from textgen_compose import COMPOSERS, Reject, negation
from textgen_phrases import BIN, UN, UNDEF, TooBig
from textgen_render import money_values, readings, render, text_of


@dataclass(frozen=True)
class Item:
    text: str
    status: str            # ok | undefined | ambiguous
    values: frozenset      # acceptable exact values (ok), or the readings (ambiguous)
    cls: str               # shape/feature, for coverage and failure classes
    origin: str            # base | near | negation
    spec: tuple
    toks: tuple            # (text, kind, glue); kind: skip | ctx | op | num | unit | paren

    @property
    def value(self) -> F | None:
        """The one exact value where there is exactly one (money in cents may also be read in dollars)."""
        return next(iter(self.values)) if self.status == "ok" and len(self.values) == 1 else None


_PRIORITY = ("latex_mixed", "latex_frac", "idiom", "mixedw", "fracw", "decw", "words", "mixed", "frac", "dec",
             "usd", "cent", "neg", "int")


def leaves(spec) -> list[tuple]:
    if isinstance(spec, tuple) and spec and spec[0] == "n":
        return [spec[1]]
    return [lf for part in spec if isinstance(part, tuple) for lf in leaves(part)] if isinstance(spec, tuple) else []


def feature(spec) -> str:
    forms = {("neg" if lf[0] == "int" and lf[1] < 0 else lf[0]) for lf in leaves(spec)}
    if any("\\" in str(p) for p in spec_templates(spec)):
        return "latex"
    return next((f for f in _PRIORITY if f in forms), "other")


def spec_templates(spec) -> list[str]:
    if not isinstance(spec, tuple) or not spec:
        return []
    own = [spec[1]] if spec[0] in ("b", "u") else []
    return own + [t for part in spec[1:] if isinstance(part, tuple) for t in spec_templates(part)]


def make(spec: tuple, shape: str, origin: str) -> Item:
    toks = tuple(render(spec))
    if spec[0] == "M":
        status, vals = money_values(spec[2])
    else:
        vals = frozenset(readings(spec))
        status = "ambiguous" if len(vals) > 1 else "undefined" if UNDEF in vals else "ok"
    return Item(text_of(toks, spec), status, frozenset(vals), f"{shape}/{feature(spec)}", origin, spec, toks)


def _alternatives(node) -> list[tuple]:
    """Specs one phrasing or one leaf away from `node` (the caller keeps one-token differences)."""
    if not isinstance(node, tuple) or not node:
        return []
    out = []
    if node[0] == "n":
        out += [("n", lf) for lf in W.neighbors(node[1])]
    elif node[0] in ("b", "u"):
        table = BIN if node[0] == "b" else UN
        ph = table[node[1]]
        for t, alt in table.items():
            if t != node[1] and alt.group == ph.group and alt.form == ph.form and _same_level(ph, alt) \
                    and "~/" not in t + node[1]:
                out.append((node[0], t, *node[2:]))
    elif node[0] in ("C", "C2"):
        dims = W.UNITS[node[3] if node[0] == "C" else node[6]]
        for pos in ((4, 5) if node[0] == "C" else (3, 5, 7)):
            out += [node[:pos] + (i,) + node[pos + 1:] for i in range(len(dims)) if i != node[pos]]
    for i, part in enumerate(node):
        if i and isinstance(part, tuple):
            out += [node[:i] + (alt,) + node[i + 1:] for alt in _alternatives(part)]
    return out


def _same_level(a, b) -> bool:
    level = {"+": 1, "-": 1, "*": 2, "/": 2}
    return a.form not in ("sym", "tight") or level.get(a.op, 3) == level.get(b.op, 3)


def near_misses(item: Item, limit: int | None = None, rng: random.Random | None = None) -> list[Item]:
    """Single-word substitutions of `item`: one operator word, number word, idiom or unit replaced, each
    with its own value (kept only where exactly one token of the text changed); with `limit`, that many
    at most, drawn by `rng`."""
    shape = item.cls.split("/")[0]
    out, seen = [], {item.text}
    specs = _alternatives(item.spec)
    if rng is not None:
        rng.shuffle(specs)
    for spec in specs:
        if limit is not None and len(out) >= limit:
            break
        try:
            alt = make(spec, shape, "near")
        except (TooBig, Reject):
            continue
        if alt.text in seen or len(alt.toks) != len(item.toks):
            continue
        if changed_token(item, alt) is not None:
            seen.add(alt.text)
            out.append(alt)
    return out


def changed_token(a: Item, b: Item) -> int | None:
    """The one token where `b` differs from `a`, or None (another length, or several differ)."""
    if len(a.toks) != len(b.toks):
        return None
    diff = [i for i, (x, y) in enumerate(zip(a.toks, b.toks, strict=True)) if x[0] != y[0]]
    return diff[0] if len(diff) == 1 else None


SHAPES = {"leaf": 4, "unary": 12, "binary": 24, "unary+binary": 14, "chain": 12, "percent": 8, "money": 8,
          "units": 8, "percent-inverse": 2, "goes-into": 2}


class Corpus:
    """Items by text; a text generated twice with different values is a generator conflict (kept aside)."""

    def __init__(self) -> None:
        self.items: dict[str, Item] = {}
        self.conflicts: list[tuple[Item, Item]] = []

    def add(self, item: Item) -> bool:
        old = self.items.get(item.text)
        if old is None:
            self.items[item.text] = item
            return True
        if (old.status, old.values) != (item.status, item.values):
            self.conflicts.append((old, item))
        return False


def generate(n: int, seed: int = 49, near: int = 2, negations: float = 0.15) -> Corpus:
    """At least `n` distinct texts (base items, up to `near` near misses each, and some negations)."""
    rng = random.Random(seed)
    corpus = Corpus()
    names, weights = list(SHAPES), list(SHAPES.values())
    while len(corpus.items) < n:
        shape = rng.choices(names, weights)[0]
        try:
            base = make(COMPOSERS[shape](rng), shape, "base")
        except (TooBig, Reject):
            continue
        corpus.add(base)
        for alt in near_misses(base, near, rng) if near else []:
            corpus.add(alt)
        if rng.random() < negations:
            spec = negation(base.spec, rng)
            if spec is not None:
                try:
                    corpus.add(make(spec, shape, "negation"))
                except (TooBig, Reject):
                    pass
    return corpus
