"""The catalog's schema: SQLAlchemy 2 declarative models (the source of truth the migrations must match).

Ids are portable, so a bundle moves rows between catalogs without renumbering: a problem's id is the SHA-256
of its normalized text, an artifact's the SHA-256 of its bytes, runs, attempts and verifications random
UUIDs. Times are naive UTC, so SQLite and PostgreSQL compare them alike. Provenance: artifact ->
verification -> attempt -> problem (and run); artifact -> parent artifact for KV chains.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Deterministic constraint names: Alembic (and SQLite batch mode, which rebuilds tables) can only alter or
# drop a constraint it can name, and the names must be the same on every backend.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

PROBLEM_STATUSES = ("pending", "claimed", "verified", "failed")
HASH = String(64)  # SHA-256 hex
UUID = String(32)  # uuid4().hex
SCOPE = String(40)  # a tenant's name, or `shared`


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class ProblemRow(Base):
    """A problem, deduplicated by normalized text; also the durable work queue (status + lease)."""

    __tablename__ = "problems"
    __table_args__ = (
        CheckConstraint(f"status IN {PROBLEM_STATUSES!r}", name="status"),
        Index("ix_problems_status_created_at", "status", "created_at"),
        Index("ix_problems_scope_status_created_at", "scope", "status", "created_at"),
    )

    id: Mapped[str] = mapped_column(HASH, primary_key=True)  # problem_hash(text)
    text: Mapped[str] = mapped_column(Text)
    answer: Mapped[str] = mapped_column(Text)
    source: Mapped[str] = mapped_column(String(200))
    topic: Mapped[str] = mapped_column(String(200), index=True)
    template: Mapped[str | None] = mapped_column(String(200), index=True)
    external_id: Mapped[str | None] = mapped_column(String(200))
    gold_source: Mapped[str | None] = mapped_column(String(300))  # `computed`, or who gave the gold
    status: Mapped[str] = mapped_column(String(16), default="pending")
    claimed_by: Mapped[str | None] = mapped_column(String(200))
    lease_until: Mapped[datetime | None] = mapped_column(DateTime)
    claims: Mapped[int] = mapped_column(Integer, default=0)  # how often it was handed out
    created_at: Mapped[datetime] = mapped_column(DateTime)
    updated_at: Mapped[datetime] = mapped_column(DateTime)
    # Migration 0006: whose memory it is (`problems/scope_ids.py`): a tenant's name, or `shared`.
    scope: Mapped[str] = mapped_column(SCOPE, default="shared", server_default="shared")
    # Migration 0008: why a failed problem failed (`learn/failures.py`: attempts, distinct answers, the most
    # common and the closest wrong answer); NULL otherwise.
    failure: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class RunRow(Base):
    """One invocation of the learning loop or an eval: its configuration and, once finished, a summary."""

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(UUID, primary_key=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    started_at: Mapped[datetime] = mapped_column(DateTime)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime)


class AttemptRow(Base):
    """One solution: which model, which sampling, what it cost, and whether the model wrote it (`provenance`)."""

    __tablename__ = "attempts"

    id: Mapped[str] = mapped_column(UUID, primary_key=True)
    problem_id: Mapped[str] = mapped_column(ForeignKey("problems.id"), index=True)
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id"), index=True)
    model_fingerprint: Mapped[str] = mapped_column(String(128))
    sampling: Mapped[dict[str, Any]] = mapped_column(JSON)
    output_text: Mapped[str] = mapped_column(Text)
    tokens: Mapped[int] = mapped_column(Integer)
    seconds: Mapped[float] = mapped_column(Float)
    cpu_seconds: Mapped[float] = mapped_column(Float)
    energy_joules: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    # Migration 0009: `sampled` (the model wrote it) or `gold` (a trusted gold written as the answer when no
    # sample verified, `learn/gold_solutions.py`).
    provenance: Mapped[str] = mapped_column(String(16), default="sampled", server_default="sampled")


class VerificationRow(Base):
    """A verifier's verdict on an attempt; the verifier version makes old verdicts re-checkable."""

    __tablename__ = "verifications"

    id: Mapped[str] = mapped_column(UUID, primary_key=True)
    attempt_id: Mapped[str] = mapped_column(ForeignKey("attempts.id"), index=True)
    verifier_version: Mapped[str] = mapped_column(String(100))
    verified: Mapped[bool] = mapped_column(Boolean)
    reason: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class ArtifactRow(Base):
    """A KV artifact's catalog row, parsed from its own header: the blob is the truth, the row an index."""

    __tablename__ = "artifacts"

    id: Mapped[str] = mapped_column(HASH, primary_key=True)  # SHA-256 of the blob
    parent_id: Mapped[str | None] = mapped_column(ForeignKey("artifacts.id"), index=True)
    verification_id: Mapped[str | None] = mapped_column(ForeignKey("verifications.id"), index=True)
    token_start: Mapped[int] = mapped_column(Integer)
    token_end: Mapped[int] = mapped_column(Integer)
    n_tokens: Mapped[int] = mapped_column(Integer)
    size: Mapped[int] = mapped_column(BigInteger)
    model_fingerprint: Mapped[str] = mapped_column(String(128), index=True)
    runtime_fingerprint: Mapped[str] = mapped_column(String(128))
    dtype: Mapped[str] = mapped_column(String(32))
    layer_kinds: Mapped[list[Any]] = mapped_column(JSON)
    token_ids: Mapped[list[Any]] = mapped_column(JSON)
    location: Mapped[str] = mapped_column(String(1000))  # which store holds the bytes (machine-local)
    created_at: Mapped[datetime] = mapped_column(DateTime)
    # Migration 0004: rebuilt from which artifact under another runtime (`catalog recompile`); the header's
    # `extra`, so the row alone rebuilds the blob; and, machine-local, eviction under a store budget.
    recompiled_from: Mapped[str | None] = mapped_column(HASH, index=True)
    extra: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    last_grafted_at: Mapped[datetime | None] = mapped_column(DateTime)
    evicted_at: Mapped[datetime | None] = mapped_column(DateTime)
    rebuilds: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    scope: Mapped[str] = mapped_column(SCOPE, default="shared", server_default="shared", index=True)  # 0006


class LibraryRow(Base):
    """A named collection of artifact chains, usually one per topic or template."""

    __tablename__ = "libraries"

    name: Mapped[str] = mapped_column(String(200), primary_key=True)
    topic: Mapped[str | None] = mapped_column(String(200))
    template: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(DateTime)
    scope: Mapped[str] = mapped_column(SCOPE, default="shared", server_default="shared", index=True)  # 0006


class LibraryEntryRow(Base):
    """Position `position` of chain `chain_index` in a library; a new chain starts when the context is full."""

    __tablename__ = "library_entries"
    __table_args__ = (UniqueConstraint("library", "artifact_id"),)

    library: Mapped[str] = mapped_column(ForeignKey("libraries.name"), primary_key=True)
    chain_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    artifact_id: Mapped[str] = mapped_column(ForeignKey("artifacts.id"), index=True)
    added_at: Mapped[datetime] = mapped_column(DateTime)


class ProblemKey(Base):
    """A problem's canonical key (same mathematics, same key) and its numbers multiset, from
    `problems/canonical.py` (`key_version` names the algorithm; a newer one recomputes old rows). A problem
    with no key is matched only by text similarity among problems with the same `numbers`."""

    __tablename__ = "problem_keys"

    problem_id: Mapped[str] = mapped_column(ForeignKey("problems.id"), primary_key=True)
    key_version: Mapped[str] = mapped_column(String(16))
    canonical_key: Mapped[str | None] = mapped_column(String(500), index=True)
    numbers: Mapped[str] = mapped_column(String(500), index=True)


class Recall(Base):
    """Which artifact serves a verified problem's recurrence: its solution alone, a root after BOS, so it is
    the nearest and only example in the context (library chains serve transfer)."""

    __tablename__ = "recalls"

    problem_id: Mapped[str] = mapped_column(ForeignKey("problems.id"), primary_key=True)
    # Migration 0004: one recall per (problem, artifact): its original and each recompiled one.
    artifact_id: Mapped[str] = mapped_column(ForeignKey("artifacts.id"), primary_key=True, index=True)
    verification_id: Mapped[str] = mapped_column(ForeignKey("verifications.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class RecallAnswerRow(Base):
    """A recall's decode (migration 0010): the question decoded greedily after the graft of the chain ending
    at `artifact_id`, under the cap `max_tokens`, by an engine with these fingerprints
    (`catalog.recall_answers`). Derived data: not in bundles (the importer's engine computes its own)."""

    __tablename__ = "recall_answers"

    artifact_id: Mapped[str] = mapped_column(HASH, primary_key=True)  # the grafted chain's tail
    question_hash: Mapped[str] = mapped_column(HASH, primary_key=True)  # SHA-256 of the question decoded
    prompt: Mapped[str] = mapped_column(String(16), primary_key=True)  # the prompt format ("query")
    model_fingerprint: Mapped[str] = mapped_column(String(128), primary_key=True)
    runtime_fingerprint: Mapped[str] = mapped_column(String(128), primary_key=True)
    max_tokens: Mapped[int] = mapped_column(Integer)  # the cap it was decoded under
    chain: Mapped[Any] = mapped_column(JSON)  # the grafted artifact ids, root first
    start: Mapped[int] = mapped_column(Integer)  # grafted tokens: the prompt's first position
    prompt_token_ids: Mapped[Any] = mapped_column(JSON)
    output_token_ids: Mapped[Any] = mapped_column(JSON)
    output_text: Mapped[Any] = mapped_column(JSON)  # a JSON string: exact, NUL included (PostgreSQL text has none)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class RuntimeRow(Base):
    """The readable facts (`workers.runtime.runtime_facts`) behind a runtime fingerprint, recorded by the
    engines that use the catalog, so a foreign artifact's difference can be named field by field."""

    __tablename__ = "runtimes"

    fingerprint: Mapped[str] = mapped_column(String(128), primary_key=True)
    facts: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class ProblemShape(Base):
    """A problem's template shape (`problems/shapes.py`: numbers masked), hashed and indexed: classifying a
    new problem into a template is one index seek for the oldest problem of its shape (migration 0005).
    Derived from the text (filled lazily for rows written without it, e.g. by an import); `created_at` is
    the problem's own."""

    __tablename__ = "problem_shapes"
    __table_args__ = (Index("ix_problem_shapes_shape_hash", "shape_hash", "created_at", "problem_id"),)

    problem_id: Mapped[str] = mapped_column(ForeignKey("problems.id"), primary_key=True)
    shape_hash: Mapped[str] = mapped_column(HASH)
    created_at: Mapped[datetime] = mapped_column(DateTime)


class TenantRow(Base):
    """A tenant of `galahad serve` (migration 0006): its token only as a salted SHA-256 (`catalog.tenants`),
    its quotas (None: unlimited), and whether it was revoked. Its name is its memory's scope."""

    __tablename__ = "tenants"

    name: Mapped[str] = mapped_column(SCOPE, primary_key=True)
    token_salt: Mapped[str] = mapped_column(String(32))
    token_hash: Mapped[str] = mapped_column(HASH, unique=True)
    rpm: Mapped[int | None] = mapped_column(Integer)  # requests per minute
    queue: Mapped[int | None] = mapped_column(Integer)  # problems waiting to be learned
    store_bytes: Mapped[int | None] = mapped_column(BigInteger)  # artifact bytes in its scope
    created_at: Mapped[datetime] = mapped_column(DateTime)
    rotated_at: Mapped[datetime | None] = mapped_column(DateTime)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime)


class PromotionRow(Base):
    """A tenant's verified problem moved into `shared` (migration 0006): who moved it, when, from where."""

    __tablename__ = "promotions"

    id: Mapped[str] = mapped_column(UUID, primary_key=True)
    problem_id: Mapped[str] = mapped_column(HASH, index=True)  # its id in shared
    from_scope: Mapped[str] = mapped_column(SCOPE)
    from_problem_id: Mapped[str] = mapped_column(HASH)
    promoted_by: Mapped[str] = mapped_column(String(200))
    promoted_at: Mapped[datetime] = mapped_column(DateTime)



class TransferGateRow(Base):
    """Whether the `transfer` or `similar` route may answer for a (model, library) (migration 0007): open only
    where `eval transfer` on held-out problems measured the route beating the base model on the same problems
    (`catalog.gates`). The evidence: the manifest's id, the condition measured, both counts."""

    __tablename__ = "transfer_gates"

    model_fingerprint: Mapped[str] = mapped_column(String(128), primary_key=True)
    library: Mapped[str] = mapped_column(String(200), primary_key=True)  # template:<t> or topic:<t>
    route: Mapped[str] = mapped_column(String(16), primary_key=True)  # transfer | similar
    open: Mapped[bool] = mapped_column(Boolean)
    manifest_id: Mapped[str] = mapped_column(HASH)  # the eval manifest's manifest_sha256
    condition: Mapped[str] = mapped_column(String(40))  # the eval condition that measured the route
    route_correct: Mapped[int] = mapped_column(Integer)
    route_n: Mapped[int] = mapped_column(Integer)
    base_correct: Mapped[int] = mapped_column(Integer)
    base_n: Mapped[int] = mapped_column(Integer)
    recorded_at: Mapped[datetime] = mapped_column(DateTime)

TABLES = Base.metadata.tables
