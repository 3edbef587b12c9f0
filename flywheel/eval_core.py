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

from galahad.flywheel import prompts
from galahad.flywheel.evidence import digest, output_hash

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
    """Run one spec; returns the record's output half (tokens, text, hashes, cost)."""
    from galahad.flywheel.memory import load_chain
    from galahad.workers.graft import restore
    from galahad.workers.telemetry import Stopwatch

    text = prompts.few_shot_prompt(spec.problem) if spec.prompt == "few-shot" else prompts.query(spec.problem)
    with Stopwatch(meter) as sw:
        if spec.graft_tail:
            chain = load_chain(store, spec.graft_tail)
            cache, start = restore(engine, chain), chain[-1].meta.end
            ids = engine.encode(text, bos=False)
            artifacts = [a.id for a in chain]
        else:
            cache, start, artifacts = engine.new_cache(), 0, []
            ids = engine.encode(text, bos=True)
        out = engine.decode(cache, ids, start, spec.max_tokens, temperature=spec.temperature, seed=spec.seed,
                            stop=(prompts.ANSWER_STOP,))
    m = sw.result
    return {
        "input_sha256": digest({"artifacts": artifacts, "prompt_token_ids": ids}),
        "grafted_artifacts": artifacts,
        "grafted_tokens": start,
        "output_token_ids": out.token_ids,
        "output_text": out.text,
        "output_sha256": output_hash(out.token_ids, out.text),
        "decode_tokens": len(out.token_ids),
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
