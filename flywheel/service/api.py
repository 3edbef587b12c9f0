"""The versioned JSON API: what a request may carry (texts, ids, `Decoding`; refused with `NotFound` 404,
`TooLarge` 413, else 400) and the request and response models (pydantic) FastAPI validates and documents.

Problem lists (`POST /v1/problems`) are not modelled here: they are validated by the problem-file schema
(`problems.records.problem_from_dict`), all or nothing, exactly as a JSONL file is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from galahad.flywheel.errors import GalahadError

# -- what a request may carry ----------------------------------------------------------------------

_ID = re.compile(r"[0-9a-f]{64}")  # matched whole (fullmatch): a trailing newline is no id


class NotFound(GalahadError):
    """An unknown id (HTTP 404)."""


class TooLarge(GalahadError):
    """A body or text over the service's limits (HTTP 413)."""


_SURROGATE = re.compile("[\ud800-\udfff]")


def checked_text(value: object, name: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise GalahadError(f"{name} must be a non-empty string")
    if len(value) > limit:
        raise TooLarge(f"{name} is {len(value)} characters; the limit is {limit}")
    if "\x00" in value:
        raise GalahadError(f"{name} contains a NUL character")
    if _SURROGATE.search(value):
        raise GalahadError(f"{name} contains a lone surrogate (not valid Unicode text)")
    return value


def clean_strings(obj: object, where: str, depth: int = 0) -> None:
    """Refuse NUL characters and lone surrogates anywhere in a submitted JSON value (400)."""
    if depth > 8:
        raise GalahadError(f"{where}: nested too deeply")
    if isinstance(obj, str):
        if "\x00" in obj or _SURROGATE.search(obj):
            raise GalahadError(f"{where}: contains a NUL character or a lone surrogate")
    elif isinstance(obj, dict):
        for k, v in obj.items():
            clean_strings(k, where, depth + 1)
            clean_strings(v, f"{where}.{str(k)[:40]}", depth + 1)
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            clean_strings(v, f"{where}[{i}]", depth + 1)


@dataclass(frozen=True)
class Decoding:
    """How a caller asks the answer decoded; the defaults are `/v1/solve`'s (one greedy answer)."""

    max_tokens: int | None = None  # a cap on each decode (None: the service's budgets)
    n: int = 1  # > 1: n answers sampled from the answering route's context
    temperature: float = 1.0  # the sampled answers' temperature (n > 1 only; one answer is greedy)
    seed: int = 0  # sample i draws from seed + i
    logprobs: int | None = None  # None: none; k: each decoded token's logprob and its k most likely tokens
    stop: tuple[str, ...] = ()  # the answer cut before the first of these strings
    # Where the computed value refutes the model: the value answers (`computed`) or the model's answer labelled
    # wrong (`model`); None: the server's (`ServiceConfig.answer_policy`).
    answer_policy: str | None = None
    # True: a hit is grafted and decoded by the model now, not read back from a decode already computed
    # (`recall_memo.py`): the same bytes, measured afresh
    model_decode: bool = False

    @property
    def sampled(self) -> bool:
        return self.n > 1


def checked_id(value: str, what: str) -> str:
    if not _ID.fullmatch(value):
        raise NotFound(f"unknown {what} {value[:80]!r} (ids are 64 lowercase hex characters)")
    return value


class SolveRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    problem: str
    gold: str | None = None
    answer_policy: str | None = None  # `computed` | `model` (`config.ANSWER_POLICIES`); None: the server's
    model_decode: StrictBool = False  # a hit grafted and decoded now, not read back (`Decoding.model_decode`)


class Choice(BaseModel):
    """One answer returned: the walk's own (n = 1), or each of n sampled from its route's context."""
    model_config = ConfigDict(frozen=True)
    answer: str
    finish_reason: str  # "stop", or "length" when its decode ran out of tokens
    verified: bool | None  # memory's verdict on this answer (True only whole and uncut)
    matches_gold: bool | None
    decode_tokens: int
    logprobs: list[dict] | None = None  # each decoded token's {token, logprob, top} (asked: the OpenAI routes)
    model_answer: str | None = None  # the model's answer the computed value refuted (then `answer` is the value)


class SolveResult(BaseModel):
    """A solve's result, its fields listed once (`Answering.solve`): `/v1/solve` renders it (the `exclude`d
    fields are the OpenAI routes' only), and the OpenAI routes' `galahad` extension renders it too
    (`openai_protocol.extension`)."""
    model_config = ConfigDict(frozen=True)
    answer: str
    path: str  # hash | key | similar | transfer | base | computed (the value answered: the model's was refuted)
    # True: the catalog's verified answer to this same problem (hash, key), or the answer equals the text's
    # computed value; False: it differs from the computed value (`reason`); None: nothing could check it.
    verified: bool | None
    reason: str | None = None  # why verified is False: "wrong: computed value is X, read as E"
    computed: str | None = None  # the text's computed value (its canonical key's exact value), where it has one
    reading: str | None = None  # with `computed`: the expression the key reader read ("20 × 12")
    matches_gold: bool | None  # the answer checked against the caller's gold (None: no gold given)
    gold_source: str | None  # who vouches for a verified answer's gold: `computed`, or who gave it
    matched_problem: str | None  # the problem recalled (hash, key) or grafted as an example (similar)
    decode_tokens: int  # decoded now, over every choice (0: the answer was read back, `answer_from`)
    # how the answer's tokens were had: `decode` (a forward pass now), `memo` (this replica decoded this recall
    # before) or `stored` (the catalog's decode of this recall, computed where its artifact was deposited)
    answer_from: str = "decode"
    grafted_artifacts: list[str]
    grafted_tokens: int  # the context grafted from memory (0 on the base path)
    prompt_tokens: int  # the whole context read: grafted + the prompt prefilled
    model_fingerprint: str
    runtime_fingerprint: str
    seconds: float
    problem_id: str
    queued: bool  # handed to the learner (a gold, or the computed value, for a problem memory did not verify)
    # Memory knows the problem only through artifacts made under another runtime or model: the one line that
    # says so and what to run (`galahad catalog recompile`); None otherwise.
    memory_note: str | None = None
    model_answer: str | None = None  # path `computed`: the model's answer the computed value refuted
    solution: str | None = None  # a verified recall (hash, key): `sampled` (the model's) or `gold` (its gold)
    finish_reason: str = Field(exclude=True)  # the first choice's
    choices: list[Choice] = Field(exclude=True)


class Submitted(BaseModel):
    id: str  # the problem's id in the catalog (hash of its normalized text)
    external_id: str
    status: str


class SubmitResponse(BaseModel):
    problems: list[Submitted]


class CommonAnswer(BaseModel):
    answer: str
    count: int


class ClosestAnswer(BaseModel):
    answer: str
    distance: float  # |answer - gold|, both read as plain numbers


class Failure(BaseModel):
    """Why a problem failed (`learn/failures.py`): its last claim's attempts and the answers they gave."""
    attempts: int
    distinct_answers: int
    no_answer: int  # attempts that gave no answer at all
    most_common: CommonAnswer | None  # the most frequent wrong answer
    closest: ClosestAnswer | None  # the answer nearest the gold (None: gold or answers not plain numbers)
    tries: list[dict] | None = None  # every try (a failed problem asked again is retried): try, k, attempts, ...


class ProblemStatus(BaseModel):
    id: str
    text: str
    status: str
    attempts: int
    verified_answer: str | None
    solution: str | None = None  # who wrote the verified answer: `sampled` (the model) or `gold` (its gold)
    artifact_id: str | None  # its library artifact
    recall_artifact_id: str | None = None  # the artifact recurrence grafts (the solution alone)
    failure: Failure | None = None  # status failed: why; None otherwise (and for problems failed before 0008)
