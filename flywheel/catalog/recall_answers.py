"""`catalog.recall_answers`: a recall's decode, stored where it was first computed, read back by a hit.

A recall is a fixed function of the chain it grafts, the question, the prompt format and the cap under
given (model, runtime) fingerprints, so the depositor stores it with the recall artifact, a replica stores
one it had to decode, and a first hit on any replica is one primary-key read (`service/recall_memo.py`).
`get` returns a decode only where a fresh one under the asked cap gives the same tokens: the cap it ran
under, or any cap that fits an answer that stopped on its own.
"""

from __future__ import annotations

import hashlib
from typing import Any

from sqlalchemy import func, select

from galahad.flywheel.catalog.db import now
from galahad.flywheel.catalog.part import Fingerprints, Part
from galahad.flywheel.catalog.schema import TABLES

RA = TABLES["recall_answers"]
FIELDS = ("chain", "start", "prompt_token_ids", "output_token_ids", "output_text")  # what a decode read and wrote


def question_hash(question: str) -> str:
    return hashlib.sha256(question.encode("utf-8", "surrogatepass")).hexdigest()


def _key(tail: str, question: str, prompt: str, fingerprints: Fingerprints) -> dict[str, str]:
    return dict(artifact_id=tail, question_hash=question_hash(question), prompt=prompt,
                model_fingerprint=fingerprints[0], runtime_fingerprint=fingerprints[1])


def answers_cap(row: dict[str, Any], cap: int) -> bool:
    """Whether a decode stored under `row["max_tokens"]` is what a fresh one under `cap` gives: the same cap,
    or one it stopped before on its own (fewer tokens than its cap, no more than `cap`)."""
    n = len(row["output_token_ids"])
    return cap == row["max_tokens"] or (n < row["max_tokens"] and n <= cap)


class RecallAnswers(Part):
    def put(self, tail: str, question: str, prompt: str, max_tokens: int, fingerprints: Fingerprints,
            decoded: dict[str, Any]) -> bool:
        """Store a decode (`decoded`: `FIELDS`); idempotent (the first stored stays: the same inputs give the
        same bits). True when it is new."""
        row = {**_key(tail, question, prompt, fingerprints), "max_tokens": int(max_tokens),
               **{f: decoded[f] for f in FIELDS}, "created_at": now()}
        row["chain"], row["output_token_ids"] = list(row["chain"]), [int(t) for t in row["output_token_ids"]]
        row["prompt_token_ids"] = [int(t) for t in row["prompt_token_ids"]]
        with self.write() as conn:
            return self.insert_ignore(conn, RA, [row]) == 1

    def get(self, tail: str, question: str, prompt: str, cap: int, fingerprints: Fingerprints) -> dict[str, Any] | None:
        """The stored decode of `question` after the chain ending at `tail` that a fresh one under `cap`
        equals (`answers_cap`), or None."""
        where = [RA.c[k] == v for k, v in _key(tail, question, prompt, fingerprints).items()]
        row = self.read_one(select(RA).where(*where))
        return row if row is not None and answers_cap(row, cap) else None

    def count(self) -> int:
        return int(self.scalar(select(func.count()).select_from(RA)))
