"""What every eval shares: a record's spec (how to produce one output), executing it, and its verdict.

A spec is everything that determines an output's bytes (problem text, prompt format, grafted tail, decoding)
and executing it under the pinned runtime is deterministic, so `replay` re-executes specs and compares
output hashes, and `rescore` recomputes verdicts from the recorded outputs with no model at all.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from dataclasses import dataclass

from galahad.flywheel.config import BUDGETS
from galahad.flywheel.evals.evidence import digest, output_hash
from galahad.flywheel.memory.recall import Prepared, Recalled, answer_decode, render
from galahad.flywheel.problems import prompts
from galahad.workers.telemetry import Stopwatch

SCORERS: dict[str, Callable[[list[dict], dict], dict]] = {}


def scorer(kind: str):
    def register(fn):
        SCORERS[kind] = fn
        return fn

    return register


@dataclass(frozen=True)
class Spec:
    id: str  # the problem id
    condition: str
    problem: str
    gold: str
    prompt: str  # "few-shot" or "query"
    graft_tail: str | None = None
    temperature: float = 0.0
    seed: int = 0
    max_tokens: int = BUDGETS.answer_tokens
    sample: int = 0
    recompute: bool = False  # the chain's tokens prefilled afresh instead of grafted (`text` condition)
    # The question decoded after the graft when it is not `problem`: a recall path asks the matched problem's
    # own question. `problem` is always the text that was asked of the system.
    decoded: str | None = None
    # A few-shot spec with no memory run as two spans, the shared prefix then the question (`workers/schedule.py`): the
    # prefix is prefilled once per process. Records made before it (False) replay the one-span schedule.
    shared_prefix: bool = False

    @property
    def text(self) -> str:
        """The question rendered after the graft."""
        return self.problem if self.decoded is None else self.decoded

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def _decode(engine, store, spec: Spec, meter=None) -> tuple[Recalled, object]:
    """(the decode, its measurement): one spec through the one decode path (`recall.answer_decode`)."""
    with Stopwatch(meter) as sw:
        r = answer_decode(engine, store, spec.graft_tail, spec.text, spec.prompt, spec.max_tokens, spec.temperature,
                          spec.seed, spec.recompute, spec.shared_prefix)
    return r, sw.result


def execute(engine, store, spec: Spec, meter=None) -> dict:
    """Run one spec through the one graft -> decode path; returns the record's output half."""
    return _output(*_decode(engine, store, spec, meter))


def sample_records(engine, store, verifier, specs: list[Spec], meter=None, until_verified: bool = True) -> list[dict]:
    """Samples of one context (same problem, prompt and memory; other seeds): the context is prefilled
    once and charged to the first sample, as the generator does. Each output equals `execute`'s for its
    spec, so a replay re-runs them one by one. Stops at the first verified sample with `until_verified`."""
    if not specs:
        return []
    first = specs[0]
    if any((s.text, s.prompt, s.graft_tail, s.recompute) != (first.text, first.prompt, first.graft_tail,
                                                             first.recompute) for s in specs):
        raise ValueError("samples of one context must share problem, prompt and memory")
    with Stopwatch(meter) as sw:
        prepared = Prepared(engine, store, first.graft_tail, render(first.text, first.prompt), first.recompute,
                            first.max_tokens)
    shared, records = sw.result, []
    for i, spec in enumerate(specs):
        with Stopwatch(meter) as sw:
            r = prepared.decode(spec.max_tokens, spec.temperature, spec.seed)
        out = _output(r, sw.result, shared if i == 0 else None)
        records.append({**spec.to_dict(), **out, **judge(verifier, spec.gold, out["output_text"])})
        if until_verified and records[-1]["verified"]:
            break
    return records


def _output(r, m, shared=None) -> dict:
    """The record's output half; `shared`: a prefill charged to this record too."""
    energy = m.energy_joules
    if shared is not None:
        energy = None if energy is None or shared.energy_joules is None else energy + shared.energy_joules
    return {
        "input_sha256": digest({"artifacts": r.artifacts, "prompt_token_ids": r.prompt_token_ids}),
        "grafted_artifacts": r.artifacts,
        "grafted_tokens": r.start,
        "output_token_ids": r.output_token_ids,
        "output_text": r.output_text,
        "output_sha256": output_hash(r.output_token_ids, r.output_text),
        "decode_tokens": len(r.output_token_ids),
        "seconds": m.seconds + (shared.seconds if shared else 0.0),
        "cpu_seconds": m.cpu_seconds + (shared.cpu_seconds if shared else 0.0),
        "energy_joules": energy,
    }


def judge(verifier, gold: str, output_text: str) -> dict:
    answer = prompts.answer_from_output(output_text)
    v = verifier.check_answer(gold, answer)
    return {"answer": answer, "verified": bool(v.verified), "reason": v.reason, "verifier_version": v.version}


def decoded_record(engine, store, verifier, spec: Spec, meter=None) -> tuple[dict, Recalled]:
    """`make_record`'s record and the decode it was made from: what `Solver.solve` takes as a route's decode
    (the evals' `system` condition records each route `solve` answers)."""
    r, m = _decode(engine, store, spec, meter)
    out = _output(r, m)
    return {**spec.to_dict(), **out, **judge(verifier, spec.gold, out["output_text"])}, r


def make_record(engine, store, verifier, spec: Spec, meter=None) -> dict:
    return decoded_record(engine, store, verifier, spec, meter)[0]


def environment() -> dict:
    """Where the eval ran: recorded, not compared (replays run elsewhere by design)."""
    return {"host": platform.node(), "machine": platform.machine(), "pid": os.getpid()}
