"""Who wrote a solution: `attempts.provenance`.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-07

`sampled`: the model wrote it (every attempt before this migration); `gold`: no sample verified, and the
learner wrote the problem's trusted gold as the answer (a gold solution, `learn/gold_solutions.py`).
Added in place (plain ALTER TABLE) with a server default, so existing rows read `sampled`.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("attempts", sa.Column("provenance", sa.String(16), nullable=False, server_default="sampled"))


def downgrade() -> None:
    op.drop_column("attempts", "provenance")  # in place (SQLite >= 3.35)
