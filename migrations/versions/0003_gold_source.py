"""Who vouches for a problem's gold: `problems.gold_source` (`computed`, or who gave it).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

A gold equal to the problem's exactly computed value (`problems/golds.py`) is `computed`; any other gold is
recorded with who gave it (a problem file and its `source`, or the API and the caller's token identity),
and every answer recalled from it carries that provenance. Rows that predate this revision have NULL: their
gold came from their `source`, unchecked.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


# Plain ALTER TABLE (no batch copy-and-rename): SQLite >= 3.35 adds and drops a column in place, and a
# table copy would trip over the views that read `problems` (migration 0001).
def upgrade() -> None:
    op.add_column("problems", sa.Column("gold_source", sa.String(length=300), nullable=True))


def downgrade() -> None:
    op.drop_column("problems", "gold_source")
