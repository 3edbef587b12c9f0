"""Answering with memory: recurrence (exact problem match), transfer (same-template library), base model.

Recurrence grafts the chain that ends in the problem's own verified solution and asks the question
again: the model copies the answer in a handful of decode tokens, and the verifier checks it against the
stored gold. Transfer grafts a prefix of the chain of solutions to problems of the same template (or
topic) as worked examples. Every graft is exact at own positions; nothing is ever re-rotated here.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field

from galahad.flywheel import prompts
from galahad.flywheel.catalog import Catalog, problem_hash
from galahad.flywheel.memory import load_chain
from galahad.flywheel.store import BlobStore
from galahad.verifier.verifier import Verifier
from galahad.workers.engine import Engine
from galahad.workers.graft import restore


@dataclass(frozen=True)
class RetrievalPolicy:
    """How the transfer path picks memory: the first `max_solutions` of the newest chain of a library."""

    max_solutions: int = 8
    scope: str = "template"  # or "topic"


@dataclass
class Answer:
    answer: str
    path: str  # recurrence | transfer | base
    decode_tokens: int
    seconds: float
    output_text: str
    grafted_artifacts: list[str] = field(default_factory=list)
    grafted_tokens: int = 0
    verified: bool | None = None  # only known when a gold answer is known (recurrence, or evals)
    reason: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def shape(text: str) -> str:
    """A problem's template shape: numbers masked, whitespace and case normalized."""
    return re.sub(r"-?\d+(\.\d+)?", "#", " ".join(text.casefold().split()))


class Solver:
    def __init__(self, engine: Engine, catalog: Catalog, store: BlobStore, verifier: Verifier | None = None,
                 max_tokens: int = 8, base_max_tokens: int = 12):
        self.engine, self.catalog, self.store = engine, catalog, store
        self.verifier = verifier or Verifier()
        self.max_tokens, self.base_max_tokens = max_tokens, base_max_tokens

    def classify(self, text: str) -> dict | None:
        """Find the template/topic of a new problem from catalog problems of the same shape."""
        from sqlalchemy import func, select

        from galahad.flywheel.models import TABLES

        P = TABLES["problems"]
        target = shape(text)
        stmt = select(P.c.template, P.c.topic, func.min(P.c.text).label("text")).group_by(P.c.template, P.c.topic)
        with self.catalog.engine.connect() as conn:
            for row in conn.execute(stmt):
                if shape(row.text) == target:
                    return {"template": row.template, "topic": row.topic}
        return None

    def graft_answer(self, text: str, chain_tail: str, path: str) -> Answer:
        chain = load_chain(self.store, chain_tail)
        cache = restore(self.engine, chain)
        ids = self.engine.encode(prompts.query(text), bos=False)
        out = self.engine.decode(cache, ids, chain[-1].meta.end, self.max_tokens, stop=(prompts.ANSWER_STOP,))
        return Answer(prompts.answer_from_output(out.text), path, len(out.token_ids), out.seconds, out.text,
                      [a.id for a in chain], chain[-1].meta.end)

    def base_answer(self, text: str, max_tokens: int | None = None) -> Answer:
        ids = self.engine.encode(prompts.few_shot_prompt(text))
        out = self.engine.decode(self.engine.new_cache(), ids, 0, max_tokens or self.base_max_tokens,
                                 stop=(prompts.ANSWER_STOP,))
        return Answer(prompts.answer_from_output(out.text), "base", len(out.token_ids), out.seconds, out.text)

    def recurrence(self, text: str) -> Answer | None:
        problem = self.catalog.problem_by_hash(problem_hash(text))
        sol = self.catalog.verified_solution(problem["id"]) if problem else None
        if not sol or not sol.get("artifact_id"):
            return None
        ans = self.graft_answer(text, sol["artifact_id"], "recurrence")
        verdict = self.verifier.check_answer(problem["answer"], ans.answer)
        ans.verified, ans.reason = verdict.verified, verdict.reason
        return ans

    def transfer_chain(self, template: str | None, topic: str | None, policy: RetrievalPolicy) -> str | None:
        names = []
        if policy.scope == "template" and template:
            names.append(f"template:{template}")
        if topic:
            names.append(f"topic:{topic}")
        for name in names:
            chain = self.catalog.library_chain(name)
            if chain:
                return chain[: policy.max_solutions][-1]
        return None

    def transfer(self, text: str, template: str | None = None, topic: str | None = None,
                 policy: RetrievalPolicy | None = None) -> Answer | None:
        if template is None and topic is None:
            match = self.classify(text)
            if match is None:
                return None
            template, topic = match.get("template"), match.get("topic")
        tail = self.transfer_chain(template, topic, policy or RetrievalPolicy())
        return self.graft_answer(text, tail, "transfer") if tail else None

    def solve(self, text: str, template: str | None = None, topic: str | None = None,
              policy: RetrievalPolicy | None = None) -> Answer:
        t0 = time.perf_counter()
        ans = self.recurrence(text)
        if ans is None or not ans.verified:
            ans = self.transfer(text, template, topic, policy) or self.base_answer(text)
        ans.seconds = time.perf_counter() - t0
        return ans
