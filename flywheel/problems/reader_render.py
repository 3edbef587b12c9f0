"""The reading of a canonical key in plain math ("20 × 12", "3/4 × 200", "(5 - 3) × 2", "2x = 8"), so a
misreading is visible in one line. Works on the key string alone (the `e:`/`q:` format of canonical.py):
`render_key(key)` -> str or None for a key it cannot parse."""

from __future__ import annotations

import re
from fractions import Fraction

_TOK = re.compile(r"-?\d+(?:/\d+)?|x|[+*\-/^|%_~m<>]\(|,|\)")
_EQ = re.compile(r"q:(\d+)x([+-]\d+)")
_SUM, _PROD, _UNARY, _POW, _ATOM = 1, 2, 3, 4, 5


def _parse(body: str) -> tuple | None:
    """The key body as a plain nested tuple (kind, *children); numbers as ("n", Fraction)."""
    toks = _TOK.findall(body)
    if "".join(toks) != body:
        return None
    stack: list[list] = [["root"]]
    for tok in toks:
        if tok.endswith("("):
            stack.append([tok[0]])
        elif tok == ")":
            if len(stack) < 2:
                return None
            node = stack.pop()
            stack[-1].append(tuple(node))
        elif tok == "x":
            stack[-1].append(("v",))
        elif tok != ",":
            stack[-1].append(("n", Fraction(tok)))
    return stack[0][1] if len(stack) == 1 and len(stack[0]) == 2 else None


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
    kind, kids = t[0], t[1:]
    if kind == "n":
        return _num(t[1])
    if kind == "v":
        return "x", _ATOM
    if kind == "+":
        pos = [k for k in kids if k[0] != "-"]
        negs = [k[1] for k in kids if k[0] == "-"]
        parts = [_wrap(k, _SUM) for k in pos]
        out = " + ".join(parts) if parts else "-" + _wrap(negs.pop(0), _PROD)
        for k in negs:
            out += " - " + _wrap(k, _PROD)
        return out, _SUM
    if kind == "*":
        mul = [k for k in kids if k[0] != "/"]
        div = [k[1] for k in kids if k[0] == "/"]
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
    if kind == "m":
        return f"median({', '.join(_show(k)[0] for k in kids)})", _ATOM
    if kind in "<>":
        return f"{'max' if kind == '>' else 'min'}({', '.join(_show(k)[0] for k in kids)})", _ATOM
    raise ValueError(kind)


def render_key(key: str | None) -> str | None:
    """The plain-math reading of a key ("e:*(12,20)" -> "12 × 20"; "q:2x-8" -> "2x = 8"), or None."""
    if not isinstance(key, str):
        return None
    m = _EQ.fullmatch(key)
    if m:
        a, b = int(m.group(1)), -int(m.group(2))
        return f"{'' if a == 1 else a}x = {b}"
    if not key.startswith("e:"):
        return None
    tree = _parse(key[2:])
    if tree is None:
        return None
    try:
        return _show(tree)[0]
    except (ValueError, IndexError):
        return None
