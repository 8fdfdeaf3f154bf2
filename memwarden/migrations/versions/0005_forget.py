"""forget: deletion members, quarantined sources, receipt columns

Revision ID: 0005_forget
Revises: 0004_audit_checkpoints
Create Date: 2026-12-01

What ForgetWorkflow needs beyond the initial deletions/deletion_sinks tables:
- `deletion_members`: which memories one deletion covers (the lineage every sink purges), so the
  workflow carries only the deletion id and never a person's id;
- `deletions.selector_key` (the same request twice finds the same deletion), `cache_prefixes`
  (content-free cache lineage) and `audit_event_id` (where the receipt sits in the hash chain);
- per-sink `workflow_id`, `run_id`, `started_at` for the receipt;
- `quarantined_sources`: a source record forgotten for poisoning stays blocked.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from memwarden.stores.sql_models import UTCDateTime

revision: str = "0005_forget"
down_revision: str | Sequence[str] | None = "0004_audit_checkpoints"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine[object]:
    return sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    with op.batch_alter_table("deletions") as batch:
        batch.add_column(sa.Column("selector_key", sa.String(64), nullable=True))
        batch.add_column(sa.Column("cache_prefixes", _json(), nullable=True))
        batch.add_column(sa.Column("audit_event_id", sa.String(), nullable=True))
    op.create_index("ix_deletions_tenant_id_selector_key", "deletions", ["tenant_id", "selector_key"])
    with op.batch_alter_table("deletion_sinks") as batch:
        batch.add_column(sa.Column("workflow_id", sa.String(), nullable=True))
        batch.add_column(sa.Column("run_id", sa.String(), nullable=True))
        batch.add_column(sa.Column("started_at", UTCDateTime(), nullable=True))
    op.create_table(
        "deletion_members",
        sa.Column("deletion_id", sa.String(), nullable=False),
        sa.Column("memory_id", sa.String(), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("prior_status", sa.String(16), nullable=False),
        sa.ForeignKeyConstraint(
            ["deletion_id"],
            ["deletions.id"],
            name="fk_deletion_members_deletion_id_deletions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("deletion_id", "memory_id", name="pk_deletion_members"),
    )
    op.create_index("ix_deletion_members_tenant_id_memory_id", "deletion_members", ["tenant_id", "memory_id"])
    op.create_table(
        "quarantined_sources",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("system", sa.String(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("deletion_id", sa.String(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "system", "key", name="pk_quarantined_sources"),
    )


def downgrade() -> None:
    op.drop_table("quarantined_sources")
    op.drop_index("ix_deletion_members_tenant_id_memory_id", table_name="deletion_members")
    op.drop_table("deletion_members")
    with op.batch_alter_table("deletion_sinks") as batch:
        batch.drop_column("started_at")
        batch.drop_column("run_id")
        batch.drop_column("workflow_id")
    op.drop_index("ix_deletions_tenant_id_selector_key", table_name="deletions")
    with op.batch_alter_table("deletions") as batch:
        batch.drop_column("audit_event_id")
        batch.drop_column("cache_prefixes")
        batch.drop_column("selector_key")
