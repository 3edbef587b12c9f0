"""Why a problem failed: `problems.failure`.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-06

A problem marked `failed` (its whole sampling budget spent with no verified attempt) keeps a JSON record of
why (`learn/failures.py`): the attempts of its last claim, how many distinct answers they gave, the most
common wrong answer and how often, the answer closest to the gold where both are numbers, and how many
attempts gave no answer. NULL for every other problem and for problems that failed before this migration.
Added in place (plain ALTER TABLE): `problems` is read by the views of migration 0001.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("problems", sa.Column("failure", sa.JSON(), nullable=True))


def downgrade() -> None:
    op.drop_column("problems", "failure")  # in place (SQLite >= 3.35): a batch copy would break the views
