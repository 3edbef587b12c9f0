"""The public verifier: `Verifier.check(gold, output) -> Verdict`.

Order of work, cheapest first: size limits, answer extraction, units, identical strings, exact
rational comparison, text answers, hostile-input pre-checks, and only then the symbolic worker with a
hard deadline. Conservative throughout: a verdict is "verified" only when equality was shown; every
doubt (timeouts, parse failures, disagreements between judges) is "not verified" with its reason.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from importlib import metadata

from galahad.verifier.extract import extract_answer, extract_gold, unwrap
from galahad.verifier.guard import Limits, precheck
from galahad.verifier.normalize import clean, is_text, parse_number, parse_number_list, split_unit, text_key
from galahad.verifier.pool import WorkerPool

VERIFIER_VERSION = "1.0.0"


def _dependency(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "missing"


# Verdicts depend on the parsers' versions too, so they are part of the version every verdict carries.
VERSION = f"{VERIFIER_VERSION}+math-verify-{_dependency('math-verify')}+sympy-{_dependency('sympy')}"


@dataclass(frozen=True)
class VerifierConfig:
    """How strict and how patient the verifier is."""

    timeout_s: float = 1.0  # per symbolic check, after the worker is up; the caller gets its verdict then
    strip_units: bool = False  # when True, `10` == `10%` and `5` == `5 cm`
    workers: int = 1
    start_timeout_s: float = 60.0  # a cold worker imports sympy: slow on a busy machine, but bounded
    memory_mb: int = 3072
    limits: Limits = field(default_factory=Limits)


@dataclass(frozen=True)
class Verdict:
    """The outcome of one check. `answer` is what was extracted from the output (None if nothing)."""

    verified: bool
    reason: str
    version: str = VERSION
    answer: str | None = None
    seconds: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"{'verified' if self.verified else 'not verified'}: {self.reason}"


class Verifier:
    """Thread-safe; owns a small pool of worker processes, started on the first symbolic check."""

    def __init__(self, config: VerifierConfig | None = None):
        self.config = config or VerifierConfig()
        self._pool = WorkerPool(self.config.workers, self.config.start_timeout_s, self.config.memory_mb)

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._pool.close()

    def warm(self) -> None:
        """Start the workers now, so that the first symbolic check is not also a cold start."""
        self._pool.warm()

    def check(self, gold: str, output: str) -> Verdict:
        """Is the final answer in the model's `output` equivalent to `gold`?"""
        start = time.perf_counter()
        answer = None
        try:
            if not isinstance(gold, str) or not isinstance(output, str):
                ok, reason = False, "bad input: gold and output must be strings"
            elif max(len(gold), len(output)) > self.config.limits.max_output_chars:
                ok, reason = False, f"too large: input over {self.config.limits.max_output_chars} characters"
            else:
                found = extract_answer(output)
                answer = found.answer if found else None
                ok, reason = (False, "no answer found") if found is None else self._compare(
                    extract_gold(gold), found.answer
                )
        except Exception as exc:  # a bug here must cost a verdict, never the caller
            ok, reason = False, f"error: {type(exc).__name__}"
        return Verdict(ok, reason, VERSION, answer, time.perf_counter() - start)

    def check_answer(self, gold: str, answer: str) -> Verdict:
        """Like `check`, for an answer that was already extracted (no search for a final answer)."""
        start = time.perf_counter()
        try:
            if not isinstance(gold, str) or not isinstance(answer, str):
                ok, reason = False, "bad input: gold and answer must be strings"
            elif max(len(gold), len(answer)) > self.config.limits.max_output_chars:
                ok, reason = False, f"too large: input over {self.config.limits.max_output_chars} characters"
            else:
                ok, reason = self._compare(extract_gold(gold), unwrap(answer))
        except Exception as exc:
            ok, reason = False, f"error: {type(exc).__name__}"
        return Verdict(ok, reason, VERSION, answer if isinstance(answer, str) else None, time.perf_counter() - start)

    def check_many(self, pairs: Iterable[tuple[str, str]]) -> list[Verdict]:
        """Verdicts for (gold, output) pairs, in order; uses every worker at once."""
        pairs = list(pairs)
        if self.config.workers <= 1 or len(pairs) <= 1:
            return [self.check(g, o) for g, o in pairs]
        with ThreadPoolExecutor(self.config.workers) as ex:
            return list(ex.map(lambda p: self.check(*p), pairs))

    def _compare(self, gold: str, answer: str) -> tuple[bool, str]:
        limits = self.config.limits
        if not gold.strip():
            return False, "bad input: empty gold"
        for text, who in ((gold, "gold"), (answer, "answer")):
            if len(text) > limits.max_answer_chars:
                return False, f"too large: {who} over {limits.max_answer_chars} characters"
        gold, answer = clean(gold), clean(answer)
        for text in (gold, answer):
            problem = precheck(text, limits)
            if problem:
                return False, problem
        gold_value, gold_unit = split_unit(gold)
        value, unit = split_unit(answer)
        if gold_unit != unit and not self.config.strip_units:
            return False, f"units differ: {gold_unit or 'none'} vs {unit or 'none'}"
        if not value:
            return False, "no answer found"
        if gold_value == value:
            return True, "equal: identical"
        g, a = parse_number(gold_value), parse_number(value)
        if g is not None and a is not None:
            return (True, "equal: exact number") if g == a else (False, "not equal: different number")
        g_list, a_list = parse_number_list(gold_value), parse_number_list(value)
        if g_list is not None and a_list is not None:
            return (True, "equal: same numbers") if g_list == a_list else (False, "not equal: different numbers")
        if is_text(gold_value):
            same = text_key(gold_value) == text_key(value)
            return (True, "equal: same text") if same else (False, "not equal: text differs")
        if is_text(value):
            return False, "not equal: text answer to a mathematical gold"
        reply = self._pool.call({"gold": gold_value, "answer": value}, self.config.timeout_s)
        return bool(reply.get("ok")), str(reply.get("reason", "error: no reason"))

