"""The key reader against the generated corpus (tests/textgen.py): wrong values, keyed undefined or ambiguous
texts, keys joining different values, the word properties of issue 49 item 2 (an operator word replaced, a
meaningful word deleted, a negation, an unknown word), and coverage by phrase class. Used by
tests/test_reader_generated.py and bench/bench_reader_generated.py."""

from __future__ import annotations

import random
import time
from collections import defaultdict
from fractions import Fraction as F

from textgen import Item, changed_token, leaves, make, near_misses
from textgen_compose import negation
from textgen_phrases import TooBig
from textgen_render import Reject, text_of
from textgen_words import leaf_value

from galahad.flywheel.problems.canonical import canonical_key, value

Got = dict[str, tuple]  # text -> (key, value, ms); ERRORS[text]: what the reader raised on it
ERRORS: dict[str, str] = {}


def read(texts, got: Got | None = None) -> Got:
    """Key and value of each text, timed; a text the reader raises on is unkeyed and noted in ERRORS."""
    got = {} if got is None else got
    for t in texts:
        if t not in got:
            t0 = time.perf_counter()
            try:
                k = canonical_key(t)
                v = value(t) if k is not None else None
            except Exception as e:  # noqa: BLE001 - a failure to report, not to stop at
                k = v = None
                ERRORS[t] = f"{type(e).__name__}: {e}"
            got[t] = (k, v, (time.perf_counter() - t0) * 1000)
    return got


def _show(v) -> str:
    return "-" if v is None else str(v)


def _row(item: Item, got: Got, note: str = "") -> str:
    k, v, _ = got[item.text]
    gen = item.status if item.status != "ok" else "|".join(sorted(map(str, item.values)))
    if item.status == "ambiguous":
        gen = "ambiguous: " + " or ".join(sorted(map(str, item.values)))
    return f"{item.text!r}  key={k}  reader={_show(v)}  generator={gen}{note}"


def failures(items: list[Item], got: Got) -> dict[str, list[str]]:
    """Offending texts by 'failure | class'."""
    out: dict[str, list[str]] = defaultdict(list)
    by_key: dict[str, list[Item]] = defaultdict(list)
    for it in items:
        k, v, _ = got[it.text]
        if it.text in ERRORS:
            out[f"reader raised | {it.cls}"].append(f"{it.text!r}  {ERRORS[it.text]}")
        if k is None:
            continue
        if it.status != "ok":
            out[f"keyed {it.status} | {it.cls}"].append(_row(it, got))
            continue
        by_key[k].append(it)
        if v not in it.values:
            out[f"wrong value | {it.cls}"].append(_row(it, got))
    for k, group in by_key.items():
        common = frozenset.intersection(*(it.values for it in group))
        if not common:
            texts = "; ".join(f"{it.text!r}={'|'.join(sorted(map(str, it.values)))}" for it in group[:4])
            out[f"join | {group[0].cls}"].append(f"key={k}: {texts}")
    return dict(out)


def _plain(item: Item) -> bool:
    """No operand 0 or +-1 (where deleting or swapping a word may leave the value as it was)."""
    return all(abs(leaf_value(lf)[0]) not in (F(0), F(1)) for lf in leaves(item.spec))


def property_sample(items: list[Item], n: int, seed: int) -> list[Item]:
    pool = [it for it in items if it.status == "ok" and it.origin == "base" and _plain(it)]
    return random.Random(seed).sample(pool, min(n, len(pool)))


def _without(item: Item, i: int) -> str:
    toks = list(item.toks[:i]) + list(item.toks[i + 1:])
    if i == 0 and toks:
        toks[0] = (toks[0][0], toks[0][1], False)
    return text_of(toks, item.spec)


def _with(item: Item, i: int, word: str) -> str:
    toks = list(item.toks)
    toks[i] = (word, "op", toks[i][2])
    return text_of(toks, item.spec)


def negated(item: Item) -> Item | None:
    spec = negation(item.spec, random.Random(item.text))
    try:
        return None if spec is None else make(spec, item.cls.split("/")[0], "negation")
    except (TooBig, Reject):
        return None


def property_failures(sample: list[Item], got: Got) -> dict[str, list[str]]:
    """Issue 49 item 2 over keyed texts of `sample`: an operator word replaced by another with another value
    changes the key or removes it; a meaningful word deleted changes or removes it; an unknown word in an
    operator's place removes it; a text and its negation never share a key."""
    out: dict[str, list[str]] = defaultdict(list)
    for it in sample:
        key = got[it.text][0]
        if key is None:
            continue
        for alt in near_misses(it):
            i = changed_token(it, alt)
            if it.toks[i][1] != "op":
                continue
            read([alt.text], got)
            if got[alt.text][0] == key and not (alt.status == "ok" and alt.values & it.values):
                out[f"replaced word keeps the key | {it.cls}"].append(
                    f"{it.text!r} -> {alt.text!r} ({alt.status} {'|'.join(sorted(map(str, alt.values)))}) key={key}")
        for i, (w, kind, _) in enumerate(it.toks):
            if kind in ("skip", "ctx"):
                continue
            t = _without(it, i)
            read([t], got)
            if got[t][0] == key:
                out[f"deleted word keeps the key | {it.cls}"].append(f"{it.text!r} -> {t!r} (without {w!r}) key={key}")
            if kind == "op":
                t = _with(it, i, "zorp")
                read([t], got)
                if got[t][0] is not None:
                    out[f"unknown word keyed | {it.cls}"].append(f"{t!r} key={got[t][0]}")
        neg = negated(it)
        if neg is not None and neg.status == "ok" and not (neg.values & it.values):
            read([neg.text], got)
            if got[neg.text][0] == key:
                out[f"negation shares the key | {it.cls}"].append(f"{it.text!r} / {neg.text!r} key={key}")
    return dict(out)


def coverage(items: list[Item], got: Got) -> dict[str, list[int]]:
    """keyed / all (texts with a defined value) by shape, by feature, and over all."""
    cov: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for it in items:
        if it.status != "ok":
            continue
        shape, feat = it.cls.split("/")
        for c in ("all", f"shape {shape}", f"feature {feat}"):
            cov[c][0] += got[it.text][0] is not None
            cov[c][1] += 1
    return dict(sorted(cov.items()))


def report(fails: dict[str, list[str]], limit: int = 20) -> str:
    """The first `limit` offending texts, grouped by class, and every class's count."""
    lines, shown = [], 0
    for cls in sorted(fails, key=lambda c: -len(fails[c])):
        lines.append(f"{cls}: {len(fails[cls])}")
        for row in fails[cls]:
            if shown < limit:
                lines.append("    " + row)
                shown += 1
    return "\n".join(lines)
