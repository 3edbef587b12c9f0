"""Checking a batch of problems before anything learns from it: schema, duplicates, golds.

`findings(lines, name)` returns every finding of a problem file (`galahad problems check`): a malformed
line, a duplicate id, the same problem (text hash or canonical key) with differing golds, a gold that
disagrees with the computed value. `refuse_bad_golds` raises the first finding for `run --problems` and the
service; `unchecked_golds` names the golds nothing here could check. Conflicts with the catalog are the
intake's (`app/intake.py`): this module is torch-free and SQL-free.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems.golds import GoldCheck, check_gold, same_gold
from galahad.flywheel.problems.records import Problem, numbered_lines, parse_line, source_of


def gold_findings(problems: Sequence[Problem], places: Sequence[str],
                  checks: Sequence[GoldCheck] | None = None) -> list[str]:
    """Wrong computable golds, and the same problem (hash or key) given two different golds. `checks`:
    each problem's `check_gold`, where the caller has them already (each text is read once)."""
    out: list[str] = []
    first_by: dict[str, int] = {}
    for i, p in enumerate(problems):
        checked = checks[i] if checks is not None else check_gold(p.problem, p.answer)
        if checked.error:
            out.append(f"{places[i]}: {checked.error}")
        for ident in (f"hash:{p.hash}",) + ((f"key:{checked.key}",) if checked.key else ()):
            j = first_by.setdefault(ident, i)
            if j != i and not same_gold(problems[j].answer, p.answer):
                how = "the same text" if ident.startswith("hash:") else "the same mathematics (key)"
                out.append(f"{places[i]}: conflicting golds for {how}: {p.answer[:60]!r} here, "
                           f"{problems[j].answer[:60]!r} at {places[j]}")
                break
    return out


def unchecked_golds(problems: Sequence[Problem], checks: Sequence[GoldCheck] | None = None) -> list[Problem]:
    """The problems whose gold could not be checked: their text has no computable value here."""
    checks = checks if checks is not None else [check_gold(p.problem, p.answer) for p in problems]
    return [p for p, c in zip(problems, checks, strict=True) if not c.computed]


def unchecked_line(unchecked: Sequence[Problem], shown: int = 3) -> str | None:
    """`3 golds unchecked: no computable value (ids a, b, c)`, naming the first few; None when none is."""
    if not unchecked:
        return None
    ids = ", ".join(p.id for p in unchecked[:shown]) + (", ..." if len(unchecked) > shown else "")
    return f"{len(unchecked)} gold{'s' if len(unchecked) != 1 else ''} unchecked: no computable value (ids {ids})"


def refuse_bad_golds(problems: Sequence[Problem], places: Sequence[str],
                     checks: Sequence[GoldCheck] | None = None) -> None:
    found = gold_findings(problems, places, checks)
    if found:
        more = f" (and {len(found) - 1} more finding(s); see `galahad problems check`)" if len(found) > 1 else ""
        raise GalahadError(found[0] + more)


def findings(lines: Iterable[str], name: str = "<input>") -> tuple[list[str], list[Problem]]:
    """Every finding in a problem file, in line order (empty: the file is good), and the problems whose
    golds could not be checked (`unchecked_golds`)."""
    out: list[str] = []
    problems: list[Problem] = []
    places: list[str] = []
    seen: dict[str, str] = {}
    for _number, where, line in numbered_lines(lines, name):  # every line, a bad one a finding
        try:
            p = parse_line(line, where, source_of(name))
        except GalahadError as exc:
            out.append(str(exc))
            continue
        if p.id in seen:
            out.append(f"{where}: duplicate id {p.id!r} (first at {seen[p.id]})")
            continue
        seen[p.id] = where
        problems.append(p)
        places.append(where)
    checks = [check_gold(p.problem, p.answer) for p in problems]
    out.extend(gold_findings(problems, places, checks))
    return sorted(out, key=lambda f: _line_of(f, name)), unchecked_golds(problems, checks)


def _line_of(finding: str, name: str) -> int:
    head = finding[len(name) + 1:].split(":", 1)[0] if finding.startswith(name + ":") else ""
    return int(head) if head.isdigit() else 0
