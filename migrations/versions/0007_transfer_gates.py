"""Transfer only where it pays: `transfer_gates`, the evidence that opens a route per (model, library).

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-08

The `transfer` and `similar` routes answer for a (model, template or topic library) only where `eval
transfer` on held-out problems measured the route beating the base model on the same problems; one row per
(model fingerprint, library, route) with the manifest it came from and both counts. No row: closed.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "transfer_gates",
        sa.Column("model_fingerprint", sa.String(length=128), nullable=False),
        sa.Column("library", sa.String(length=200), nullable=False),
        sa.Column("route", sa.String(length=16), nullable=False),
        sa.Column("open", sa.Boolean(), nullable=False),
        sa.Column("manifest_id", sa.String(length=64), nullable=False),
        sa.Column("condition", sa.String(length=40), nullable=False),
        sa.Column("route_correct", sa.Integer(), nullable=False),
        sa.Column("route_n", sa.Integer(), nullable=False),
        sa.Column("base_correct", sa.Integer(), nullable=False),
        sa.Column("base_n", sa.Integer(), nullable=False),
        sa.Column("recorded_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("model_fingerprint", "library", "route", name=op.f("pk_transfer_gates")),
    )


def downgrade() -> None:
    op.drop_table("transfer_gates")
