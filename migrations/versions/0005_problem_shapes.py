"""A catalog of a million: `problem_shapes`, each problem's template shape hashed and indexed.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02

`Solver.classify` finds the template (and topic) of a new problem from the oldest catalog problem of the
same shape (numbers masked: `problems/shapes.py`). It used to read one example of every (template, topic)
group and compare shapes in Python, O(catalog) per solve: sources like GSM8K give every problem its own
template. Now it is one seek on (shape_hash, created_at, problem_id). Shapes of problems that predate this
revision (or arrive without one, e.g. from a bundle) are filled in by the catalog
(`catalog.problems.ensure_shapes`), not here: a migration knows only the schema.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "problem_shapes",
        sa.Column("problem_id", sa.String(length=64), nullable=False),
        sa.Column("shape_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["problem_id"], ["problems.id"], name=op.f("fk_problem_shapes_problem_id_problems")),
        sa.PrimaryKeyConstraint("problem_id", name=op.f("pk_problem_shapes")),
    )
    op.create_index("ix_problem_shapes_shape_hash", "problem_shapes", ["shape_hash", "created_at", "problem_id"])


def downgrade() -> None:
    op.drop_index("ix_problem_shapes_shape_hash", table_name="problem_shapes")
    op.drop_table("problem_shapes")
