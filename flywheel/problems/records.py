"""Problems: the `Problem` record, its JSONL format with all-or-nothing validation, and seeded splits.

A problem file's lines need only `problem` and `answer`; `defaults` fills the rest (`id`: `problem_hash`;
`source`: the file's name; `template`: the text's shape; `topic`: the source; docs/problems.md). A file with
one bad line is refused whole, with the line number. Splits are by hash, so the same seed puts a problem on
the same side whatever else is in the file and in whatever order.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypeVar

from galahad.flywheel.config import BUDGETS
from galahad.flywheel.errors import GalahadError
from galahad.flywheel.problems.shapes import shape_hash
from galahad.flywheel.safe_json import BadJSON
from galahad.flywheel.safe_json import loads as safe_loads

FIELDS = ("id", "problem", "answer", "topic", "template", "source")
REQUIRED = ("problem", "answer")
API_SOURCE = "api"  # the source of a problem given over HTTP without one
MAX_TEXT = BUDGETS.max_text_chars  # one field's characters
MAX_SOURCE = 200  # the catalog's `problems.source`
T = TypeVar("T")


@dataclass(frozen=True)
class Problem:
    """One problem with its gold answer. `template` groups problems that differ only in their numbers."""

    id: str
    problem: str
    answer: str
    topic: str
    template: str
    source: str

    @property
    def hash(self) -> str:
        return problem_hash(self.problem)

    def to_dict(self) -> dict:
        return asdict(self)


def problem_hash(text: str) -> str:
    """SHA-256 of the whitespace-collapsed, casefolded problem text: one key per problem as posed."""
    return hashlib.sha256(" ".join(text.casefold().split()).encode("utf-8")).hexdigest()


def source_of(name: str) -> str:
    """The default `source` of a problem file's lines: the file's name (its last path part)."""
    return (Path(name).name or name)[:MAX_SOURCE]


def defaults(values: dict, source: str) -> dict:
    """`values` with what a short problem leaves out filled in (see the module docstring); `problem` is a
    checked string (`problem_from_dict`)."""
    text, out = values.get("problem"), dict(values)
    if "source" not in out:
        out["source"] = source
    if "topic" not in out and "template" in out:
        out["topic"] = out["template"]
    if "template" not in out and "topic" in out:
        out["template"] = out["topic"]
    if isinstance(text, str) and text.strip():
        out.setdefault("id", problem_hash(text))
        out.setdefault("template", f"shape:{shape_hash(text)[:12]}")
        out.setdefault("topic", out["source"] if isinstance(out["source"], str) else source)
    return out


def _check_field(value: object, name: str, where: str) -> None:
    if not isinstance(value, str):
        raise GalahadError(f"{where}: field {name!r} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise GalahadError(f"{where}: field {name!r} is empty")
    if len(value) > MAX_TEXT:
        raise GalahadError(f"{where}: field {name!r} is over {MAX_TEXT} characters")
    if "\x00" in value or any("\ud800" <= ch <= "\udfff" for ch in value):
        raise GalahadError(f"{where}: field {name!r} contains a NUL character or a lone surrogate")


def problem_from_dict(obj: object, where: str = "problem", source: str = API_SOURCE) -> Problem:
    """A validated `Problem` (`source`: the default for a line without one); GalahadError naming `where` and
    the first thing wrong otherwise."""
    if not isinstance(obj, dict):
        raise GalahadError(f"{where}: expected a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - set(FIELDS))
    if unknown:
        raise GalahadError(f"{where}: unknown field(s) {', '.join(unknown)} (allowed: {', '.join(FIELDS)})")
    values = dict(obj)
    if "answer" in values and isinstance(values["answer"], (int, float)) and not isinstance(values["answer"], bool):
        values["answer"] = str(values["answer"])  # `"answer": 72` is the obvious way to write an integer
    for name in REQUIRED:
        if name not in values:
            raise GalahadError(f"{where}: missing field {name!r} (a problem needs at least problem and answer)")
        _check_field(values[name], name, where)
    values = defaults(values, source)  # from a checked problem text only (its hash, its shape)
    for name in FIELDS:
        _check_field(values[name], name, where)
    return Problem(**{name: values[name] for name in FIELDS})


# -- the one JSONL reader: problem files here, `galahad verify --batch` pairs (`cli/cmd_verify.py`) --------


def json_line(line: str, where: str) -> object:
    """One JSONL line's value (`safe_json`: bounded); GalahadError naming `where` otherwise."""
    try:
        return safe_loads(line)
    except BadJSON as exc:
        raise GalahadError(f"{where}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise GalahadError(f"{where}: not valid JSON ({exc.msg} at column {exc.colno})") from None


def numbered_lines(lines: Iterable[str], name: str) -> Iterator[tuple[int, str, str]]:
    """(line number, "name:line", line) for each line that is not blank, in order."""
    for number, line in enumerate(lines, start=1):
        if line.strip():
            yield number, f"{name}:{number}", line


def read_jsonl(lines: Iterable[str], name: str) -> Iterator[tuple[int, str, object]]:
    """(line number, "name:line", value) for each JSONL line that is not blank, in order; GalahadError naming
    the first line that is not JSON."""
    for number, where, line in numbered_lines(lines, name):
        yield number, where, json_line(line, where)


def read_text_file(path: str | Path, read: Callable[[Iterable[str], str], T]) -> T:
    """`read(lines, name)` over a UTF-8 text file; GalahadError for a missing file or one that is not UTF-8."""
    path = Path(path)
    try:
        with path.open(encoding="utf-8") as f:
            return read(f, str(path))
    except FileNotFoundError:
        raise GalahadError(f"{path}: no such file") from None
    except UnicodeDecodeError as exc:
        raise GalahadError(f"{path}: not UTF-8 text ({exc.reason})") from None


def parse_line(line: str, where: str, source: str = API_SOURCE) -> Problem:
    """One JSONL line as a validated `Problem` (`source`: its default); GalahadError naming `where` otherwise."""
    return problem_from_dict(json_line(line, where), where, source)


def parse_numbered(lines: Iterable[str], name: str = "<input>") -> list[tuple[Problem, str]]:
    """(problem, "name:line") pairs from JSONL lines (blank lines skipped); all or nothing, ids unique."""
    out: list[tuple[Problem, str]] = []
    seen: dict[str, int] = {}
    for number, where, obj in read_jsonl(lines, name):
        problem = problem_from_dict(obj, where, source_of(name))
        if problem.id in seen:
            raise GalahadError(f"{where}: duplicate id {problem.id!r} (first on line {seen[problem.id]})")
        seen[problem.id] = number
        out.append((problem, where))
    return out


def load_numbered(path: str | Path) -> list[tuple[Problem, str]]:
    """(problem, "file:line") pairs from a JSONL file; GalahadError with `file:line` for a malformed line."""
    return read_text_file(path, parse_numbered)


def load_jsonl(path: str | Path) -> list[Problem]:
    """Problems from a JSONL file; GalahadError with `file:line` for the first malformed line."""
    return [p for p, _ in load_numbered(path)]


def _rank(seed: int, kind: str, key: str) -> str:
    return hashlib.sha256(f"{seed}\x00{kind}\x00{key}".encode()).hexdigest()


@dataclass(frozen=True)
class Splits:
    """`train`: problems to learn on. `recurrence`: train problems asked again (the same text).
    `heldout_instances`: new problems from templates seen in train (same template, new numbers).
    `heldout_templates`: problems from templates never seen in train."""

    train: tuple[Problem, ...]
    recurrence: tuple[Problem, ...]
    heldout_instances: tuple[Problem, ...]
    heldout_templates: tuple[Problem, ...]

    def sizes(self) -> dict[str, int]:
        return {name: len(getattr(self, name)) for name in ("train", "recurrence", "heldout_instances", "heldout_templates")}


def splits(
    problems: Sequence[Problem],
    seed: int = 0,
    heldout_template_fraction: float = 0.25,
    heldout_instance_fraction: float = 0.2,
    recurrence_fraction: float = 0.25,
) -> Splits:
    """Deterministic splits by seed. Problems with the same text always land on the same side, so a
    held-out problem is never a train problem in disguise. With a single template there is nothing to
    hold out by template, and that split stays empty."""
    for name, value in (("heldout_template_fraction", heldout_template_fraction),
                        ("heldout_instance_fraction", heldout_instance_fraction),
                        ("recurrence_fraction", recurrence_fraction)):
        if not 0.0 <= value < 1.0:
            raise GalahadError(f"{name} must be in [0, 1), got {value}")
    templates = sorted({p.template for p in problems}, key=lambda t: _rank(seed, "template", t))
    n_out = int(len(templates) * heldout_template_fraction)
    if heldout_template_fraction > 0 and n_out == 0 and len(templates) > 1:
        n_out = 1
    held_templates = set(templates[:n_out])
    by_text: dict[str, list[Problem]] = {}
    for p in problems:
        by_text.setdefault(p.hash, []).append(p)
    texts = sorted(by_text, key=lambda h: _rank(seed, "instance", h))
    train, inst, tmpl = [], [], []
    n_inst = int(sum(1 for h in texts if by_text[h][0].template not in held_templates) * heldout_instance_fraction)
    for h in texts:
        group = by_text[h]
        if any(p.template in held_templates for p in group):
            tmpl.extend(group)
        elif n_inst > 0:
            inst.extend(group)
            n_inst -= 1
        else:
            train.extend(group)
    # "Same template, new numbers" needs the template in train: an instance whose template has no train
    # problem left (a tiny template) is a train problem after all.
    seen = {p.template for p in train}
    train += [p for p in inst if p.template not in seen]
    inst = [p for p in inst if p.template in seen]
    n_rec = int(len(train) * recurrence_fraction)
    recurrence = sorted(train, key=lambda p: _rank(seed, "recurrence", p.id))[:n_rec]
    position = {id(p): i for i, p in enumerate(problems)}

    def ordered(ps: list[Problem]) -> tuple[Problem, ...]:
        return tuple(sorted(ps, key=lambda p: position[id(p)]))

    return Splits(ordered(train), ordered(recurrence), ordered(inst), ordered(tmpl))
