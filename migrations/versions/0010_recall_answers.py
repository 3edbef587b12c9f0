"""Stored recall decodes: `recall_answers`.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-07

A recall's greedy decode (the question after the graft of its chain) is a fixed function of its inputs on
an engine with given fingerprints, so it is stored where it is first computed (the depositor, at deposit;
a replica, at its first hit) and a hit reads it instead of a forward pass. A new table: catalogs migrated
from before it start empty and fill as recalls are decoded.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "recall_answers",
        sa.Column("artifact_id", sa.String(64), nullable=False),
        sa.Column("question_hash", sa.String(64), nullable=False),
        sa.Column("prompt", sa.String(16), nullable=False),
        sa.Column("model_fingerprint", sa.String(128), nullable=False),
        sa.Column("runtime_fingerprint", sa.String(128), nullable=False),
        sa.Column("max_tokens", sa.Integer(), nullable=False),
        sa.Column("chain", sa.JSON(), nullable=False),
        sa.Column("start", sa.Integer(), nullable=False),
        sa.Column("prompt_token_ids", sa.JSON(), nullable=False),
        sa.Column("output_token_ids", sa.JSON(), nullable=False),
        sa.Column("output_text", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("artifact_id", "question_hash", "prompt", "model_fingerprint", "runtime_fingerprint",
                                name=op.f("pk_recall_answers")),
    )


def downgrade() -> None:
    op.drop_table("recall_answers")
