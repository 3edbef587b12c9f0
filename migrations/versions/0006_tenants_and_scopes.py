"""Many tenants, one memory: `tenants`, memory scopes, promotions.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-08

- `tenants`: one row per tenant of `galahad serve`: its token only as a salted SHA-256, its quotas
  (requests per minute, queued problems, store bytes; NULL: unlimited), when it was rotated or revoked.
- `problems.scope`, `artifacts.scope`, `libraries.scope`: whose memory a row is, a tenant's name or
  `shared`; every existing row is `shared` (the single-user catalog is the shared memory). A problem's
  queue index leads with its scope (the learner draws round-robin across scopes).
- `promotions`: who moved which verified problem from a tenant's scope into `shared`, and when.

Columns are added with plain ALTER TABLE (SQLite >= 3.35 adds columns in place); `problems` and
`artifacts` are read by the views of migration 0001, so they are never batch-copied (nor dropped columns).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    for table in ("problems", "artifacts", "libraries"):
        op.add_column(table, sa.Column("scope", sa.String(length=40), nullable=False, server_default="shared"))
    op.create_index("ix_problems_scope_status_created_at", "problems", ["scope", "status", "created_at"])
    op.create_index(op.f("ix_artifacts_scope"), "artifacts", ["scope"])
    op.create_index(op.f("ix_libraries_scope"), "libraries", ["scope"])
    op.create_table(
        "tenants",
        sa.Column("name", sa.String(length=40), nullable=False),
        sa.Column("token_salt", sa.String(length=32), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("rpm", sa.Integer(), nullable=True),
        sa.Column("queue", sa.Integer(), nullable=True),
        sa.Column("store_bytes", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("rotated_at", sa.DateTime(), nullable=True),
        sa.Column("revoked_at", sa.DateTime(), nullable=True),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_tenants")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_tenants_token_hash")),
    )
    op.create_table(
        "promotions",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("problem_id", sa.String(length=64), nullable=False),
        sa.Column("from_scope", sa.String(length=40), nullable=False),
        sa.Column("from_problem_id", sa.String(length=64), nullable=False),
        sa.Column("promoted_by", sa.String(length=200), nullable=False),
        sa.Column("promoted_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_promotions")),
    )
    op.create_index(op.f("ix_promotions_problem_id"), "promotions", ["problem_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_promotions_problem_id"), table_name="promotions")
    op.drop_table("promotions")
    op.drop_table("tenants")
    op.drop_index(op.f("ix_libraries_scope"), table_name="libraries")
    op.drop_index(op.f("ix_artifacts_scope"), table_name="artifacts")
    op.drop_index("ix_problems_scope_status_created_at", table_name="problems")
    for table in ("libraries", "artifacts", "problems"):
        op.drop_column(table, "scope")  # in place (SQLite >= 3.35): a batch copy would break the views
