"""What every eval shares: a record's spec (how to produce one output), executing it, and its verdict.

A spec is everything that determines an output's bytes: the problem text, the prompt format, the grafted
chain's tail artifact (or none), and the decoding (temperature, seed, token budget). Executing a spec
under the pinned runtime is deterministic, so `replay` re-executes specs and compares output hashes, and
`rescore` recomputes verdicts from the recorded outputs with no model at all.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from galahad.flywheel.evals.evidence import digest, output_hash
from galahad.flywheel.memory.recall import graft_decode, render
from galahad.flywheel.problems import prompts

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
    max_tokens: int = 8
    sample: int = 0

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def execute(engine, store, spec: Spec, meter=None) -> dict:
    """Run one spec through the one graft -> decode path; returns the record's output half."""
    from galahad.workers.telemetry import Stopwatch

    with Stopwatch(meter) as sw:
        r = graft_decode(engine, store, spec.graft_tail, render(spec.problem, spec.prompt), spec.max_tokens,
                         temperature=spec.temperature, seed=spec.seed)
    m = sw.result
    return {
        "input_sha256": digest({"artifacts": r.artifacts, "prompt_token_ids": r.prompt_token_ids}),
        "grafted_artifacts": r.artifacts,
        "grafted_tokens": r.start,
        "output_token_ids": r.output_token_ids,
        "output_text": r.output_text,
        "output_sha256": output_hash(r.output_token_ids, r.output_text),
        "decode_tokens": len(r.output_token_ids),
        "seconds": m.seconds,
        "cpu_seconds": m.cpu_seconds,
        "energy_joules": m.energy_joules,
    }


def judge(verifier, gold: str, output_text: str) -> dict:
    answer = prompts.answer_from_output(output_text)
    v = verifier.check_answer(gold, answer)
    return {"answer": answer, "verified": bool(v.verified), "reason": v.reason, "verifier_version": v.version}


def make_record(engine, store, verifier, spec: Spec, meter=None) -> dict:
    out = execute(engine, store, spec, meter)
    return {**spec.to_dict(), **out, **judge(verifier, spec.gold, out["output_text"])}


def environment() -> dict:
    """Where the eval ran: recorded, not compared (replays run elsewhere by design)."""
    import platform

    return {"host": platform.node(), "machine": platform.machine(), "pid": os.getpid()}
