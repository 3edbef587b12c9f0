"""Memory that outlives its KV: recompile lineage, eviction, one recall per (problem, artifact), runtimes.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02

- `artifacts.recompiled_from`: the artifact this one was rebuilt from under another runtime (`catalog
  recompile`); NULL for an original. Not a foreign key: a bundle may carry the rebuilt one without it.
- `artifacts.extra`: the header's `extra` (problem, library, verification, role), so an artifact can be
  rebuilt byte-identically from its row alone; `artifacts.last_grafted_at` (what eviction orders by),
  `artifacts.evicted_at` (its blob was deleted to fit a store budget: rows, tokens and verdicts stay) and
  `artifacts.rebuilds` (how often an evicted blob was rebuilt) are machine-local.
- `recalls` is keyed by (problem_id, artifact_id): a problem keeps one recall artifact per runtime (its
  original and each recompiled one). `recalls` is read by no view, so its batch copy is safe.
- `runtimes`: the readable facts behind each runtime fingerprint seen, so a refusal can name the fields
  that differ (cpu.model, torch, ...).

Columns are added with plain ALTER TABLE (SQLite >= 3.35 adds columns in place); the `artifacts` table is
read by the views of migration 0001, so it is never batch-copied.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("artifacts", sa.Column("recompiled_from", sa.String(length=64), nullable=True))
    op.add_column("artifacts", sa.Column("extra", sa.JSON(), nullable=True))
    op.add_column("artifacts", sa.Column("last_grafted_at", sa.DateTime(), nullable=True))
    op.add_column("artifacts", sa.Column("evicted_at", sa.DateTime(), nullable=True))
    op.add_column("artifacts", sa.Column("rebuilds", sa.Integer(), nullable=False, server_default="0"))
    op.create_index(op.f("ix_artifacts_recompiled_from"), "artifacts", ["recompiled_from"])
    with op.batch_alter_table("recalls") as batch:
        batch.drop_constraint("pk_recalls", type_="primary")
        batch.create_primary_key("pk_recalls", ["problem_id", "artifact_id"])
    op.create_table(
        "runtimes",
        sa.Column("fingerprint", sa.String(length=128), nullable=False),
        sa.Column("facts", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("fingerprint", name=op.f("pk_runtimes")),
    )


def downgrade() -> None:
    op.drop_table("runtimes")
    with op.batch_alter_table("recalls") as batch:  # keeps the oldest recall of each problem
        batch.drop_constraint("pk_recalls", type_="primary")
    op.execute("DELETE FROM recalls WHERE EXISTS (SELECT 1 FROM recalls r2 WHERE r2.problem_id = recalls.problem_id"
               " AND (r2.created_at < recalls.created_at OR (r2.created_at = recalls.created_at"
               " AND r2.artifact_id < recalls.artifact_id)))")
    with op.batch_alter_table("recalls") as batch:
        batch.create_primary_key("pk_recalls", ["problem_id"])
    op.drop_index(op.f("ix_artifacts_recompiled_from"), table_name="artifacts")
    for col in ("rebuilds", "evicted_at", "last_grafted_at", "extra", "recompiled_from"):
        op.drop_column("artifacts", col)
