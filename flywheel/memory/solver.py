"""Answering with memory: recurrence (exact problem match), transfer (same-template library), base model.

Recurrence grafts the chain that ends in the problem's own verified solution and asks the question
again: the model copies the answer in a handful of decode tokens, and the verifier checks it against the
stored gold. Transfer grafts a prefix of the chain of solutions to problems of the same template (or
topic) as worked examples (`policy.py`). Every answer goes through `recall.graft_decode`, the path the
evals measure.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field

from galahad.flywheel.artifacts.store import BlobStore
from galahad.flywheel.catalog import Catalog, problem_hash
from galahad.flywheel.memory.policy import RetrievalPolicy, library_prefix
from galahad.flywheel.memory.recall import graft_decode, render
from galahad.verifier.verifier import Verifier

__all__ = ["Answer", "RetrievalPolicy", "Solver", "shape"]


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
    def __init__(self, engine, catalog: Catalog, store: BlobStore, verifier: Verifier | None = None,
                 max_tokens: int = 8, base_max_tokens: int = 12):
        self.engine, self.catalog, self.store = engine, catalog, store
        self.verifier = verifier or Verifier()
        self.max_tokens, self.base_max_tokens = max_tokens, base_max_tokens

    @property
    def fingerprints(self) -> tuple[str, str]:
        """Only artifacts made by this engine's model under its runtime are grafted (others are ignored)."""
        return self.engine.model_fingerprint, self.engine.runtime_fingerprint

    def classify(self, text: str) -> dict | None:
        """Find the template/topic of a new problem from catalog problems of the same shape."""
        target = shape(text)
        for group in self.catalog.problem_groups():
            if shape(group["text"]) == target:
                return {"template": group["template"], "topic": group["topic"]}
        return None

    def _answer(self, text: str, tail: str | None, prompt: str, path: str, max_tokens: int) -> Answer:
        r = graft_decode(self.engine, self.store, tail, render(text, prompt), max_tokens)
        return Answer(r.answer, path, len(r.output_token_ids), r.seconds, r.output_text, r.artifacts, r.start)

    def graft_answer(self, text: str, chain_tail: str, path: str) -> Answer:
        return self._answer(text, chain_tail, "query", path, self.max_tokens)

    def base_answer(self, text: str, max_tokens: int | None = None) -> Answer:
        return self._answer(text, None, "few-shot", "base", max_tokens or self.base_max_tokens)

    def recurrence(self, text: str) -> Answer | None:
        problem = self.catalog.problem_by_hash(problem_hash(text))
        sol = self.catalog.verified_solution(problem["id"], self.fingerprints) if problem else None
        if not sol or not sol.get("artifact_id"):
            return None
        ans = self.graft_answer(text, sol["artifact_id"], "recurrence")
        verdict = self.verifier.check_answer(problem["answer"], ans.answer)
        ans.verified, ans.reason = verdict.verified, verdict.reason
        return ans

    def transfer_chain(self, template: str | None, topic: str | None, policy: RetrievalPolicy) -> str | None:
        for name in policy.libraries(template, topic):
            tail = library_prefix(self.catalog, name, policy.max_solutions, self.fingerprints)
            if tail:
                return tail
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
