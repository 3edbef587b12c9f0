"""Key strings read back: `parse_key` (an `e:` key into its tree, through reader_tree's constructors, so only a
canonical key parses), `key_solution` (the solution a `q:` key denotes) and `render_key`, the reading of a key
in plain math ("20 × 12", "3/4 × 200", "(5 - 3) × 2", "2x = 8"), so a misreading is visible in one line. The one
parser of the key format of canonical.py."""

from __future__ import annotations

import re
from fractions import Fraction

from galahad.flywheel.problems import reader_tree as rt

_KEY_TOKEN = re.compile(r"-?\d+(?:/\d+)?|x|[+*\-/^|%_~mo<>]\(|,|\)")
_EQ_KEY = re.compile(r"q:(\d+)x([+-]\d+)")


def parse_key(k: str) -> tuple | None:
    """The tree of an `e:` key or None; bounded like the reader (a key is at most MAX_KEY_CHARS)."""
    if not isinstance(k, str) or not k.startswith("e:") or len(k) > rt.MAX_KEY_CHARS:
        return None
    toks = _KEY_TOKEN.findall(k, 2)
    if "".join(toks) != k[2:]:
        return None
    stack: list[list] = [["root"]]
    for tok in toks:
        if tok.endswith("("):
            stack.append([tok[0]])
        elif tok == ")":
            if len(stack) < 2:
                return None
            node = stack.pop()
            stack[-1].append(rt.rebuild(node[0], node[1:]))
        elif tok == ",":
            continue
        elif tok == "x":
            stack[-1].append(rt.VAR)
        else:
            stack[-1].append(rt.num(Fraction(tok)))
    if len(stack) != 1 or len(stack[0]) != 2:
        return None
    tree = stack[0][1]
    return tree if tree[1] == k[2:] else None  # only canonical keys (a malformed one gives None)


def key_solution(k: str) -> Fraction | None:
    m = _EQ_KEY.fullmatch(k) if len(k) <= rt.MAX_KEY_CHARS else None
    return None if m is None or int(m.group(1)) == 0 else Fraction(-int(m.group(2)), int(m.group(1)))


_SUM, _PROD, _UNARY, _POW, _ATOM = 1, 2, 3, 4, 5


def _num(q: Fraction) -> tuple[str, int]:
    s = str(q)
    if q < 0:
        return s, _UNARY
    return s, (_ATOM if q.denominator == 1 else _PROD)


def _wrap(t: tuple, at_least: int) -> str:
    s, prec = _show(t)
    return s if prec >= at_least else f"({s})"


def _show(t: tuple) -> tuple[str, int]:
    """(text, precedence) of a tree."""
    kind, kids = t[0], rt.args(t)
    if kind == "n":
        return _num(t[2])
    if kind == "v":
        return "x", _ATOM
    if kind == "+":
        pos = [k for k in kids if k[0] != "-"]
        negs = [k[2] for k in kids if k[0] == "-"]
        parts = [_wrap(k, _SUM) for k in pos]
        out = " + ".join(parts) if parts else "-" + _wrap(negs.pop(0), _PROD)
        for k in negs:
            out += " - " + _wrap(k, _PROD)
        return out, _SUM
    if kind == "*":
        mul = [k for k in kids if k[0] != "/"]
        div = [k[2] for k in kids if k[0] == "/"]
        out = " × ".join(_wrap(k, _PROD) for k in mul) if mul else "1"
        for k in div:
            out += " ÷ " + _wrap(k, _UNARY)
        return out, _PROD
    if kind == "-":
        return "-" + _wrap(kids[0], _POW), _UNARY
    if kind == "/":
        return "1 ÷ " + _wrap(kids[0], _UNARY), _PROD
    if kind == "^":
        return f"{_wrap(kids[0], _ATOM)}^{_wrap(kids[1], _ATOM)}", _POW
    if kind == "|":
        return f"|{_show(kids[0])[0]}|", _ATOM
    if kind == "%":
        return f"{_wrap(kids[0], _UNARY)} mod {_wrap(kids[1], _UNARY)}", _PROD
    if kind == "_":
        return f"floor({_show(kids[0])[0]})", _ATOM
    if kind == "~":
        return f"round({_show(kids[0])[0]}, to {_show(kids[1])[0]})", _ATOM
    if kind in "mo":
        return f"{'median' if kind == 'm' else 'mode'}({', '.join(_show(k)[0] for k in kids)})", _ATOM
    if kind in "<>":
        return f"{'max' if kind == '>' else 'min'}({', '.join(_show(k)[0] for k in kids)})", _ATOM
    raise ValueError(kind)


def render_key(key: str | None) -> str | None:
    """The plain-math reading of a key ("e:*(12,20)" -> "12 × 20"; "q:2x-8" -> "2x = 8"), or None."""
    if not isinstance(key, str):
        return None
    m = _EQ_KEY.fullmatch(key)
    if m:
        a, b = int(m.group(1)), -int(m.group(2))
        return f"{'' if a == 1 else a}x = {b}"
    tree = parse_key(key)
    if tree is None:
        return None
    try:
        return _show(tree)[0]
    except (ValueError, IndexError):
        return None
