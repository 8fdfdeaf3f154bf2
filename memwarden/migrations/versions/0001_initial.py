"""initial schema: memories, candidates, audit_events, deletions, deletion_sinks, source_dependencies,
owner_settings

Revision ID: 0001_initial
Revises:
Create Date: 2026-11-30

Written out in full (not imported from sql_models) so that later model changes never rewrite
history; tests/integration/test_sql_store_contract.py checks models and migrations agree.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from memwarden.stores.sql_models import UTCDateTime

revision: str = "0001_initial"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine[object]:
    return sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    op.create_table(
        "memories",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("owner_id", sa.String(), nullable=False),
        sa.Column("scope", sa.String(16), nullable=False),
        sa.Column("agent_id", sa.String(), nullable=True),
        sa.Column("store", sa.String(), nullable=True),
        sa.Column("type", sa.String(32), nullable=False),
        sa.Column("slot", sa.String(), nullable=True),
        sa.Column("content", sa.Text(), nullable=True),
        sa.Column("content_hash", sa.String(64), nullable=False),
        sa.Column("source_kind", sa.String(16), nullable=False),
        sa.Column("source_ref", _json(), nullable=True),
        sa.Column("provenance", _json(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("importance", sa.Float(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("sensitivity", sa.String(16), nullable=False),
        sa.Column("sensitivity_rank", sa.Integer(), nullable=False),
        sa.Column("valid_from", UTCDateTime(), nullable=True),
        sa.Column("valid_to", UTCDateTime(), nullable=True),
        sa.Column("expires_at", UTCDateTime(), nullable=True),
        sa.Column("last_confirmed_at", UTCDateTime(), nullable=True),
        sa.Column("last_used_at", UTCDateTime(), nullable=True),
        sa.Column("supersedes", sa.String(), nullable=True),
        sa.Column("superseded_by", sa.String(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("retention_class", sa.String(), nullable=False),
        sa.Column("policy_version", sa.String(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("tombstoned_at", UTCDateTime(), nullable=True),
        sa.Column("purged_at", UTCDateTime(), nullable=True),
        sa.Column("idempotency_key", sa.String(), nullable=True),
        sa.Column("derived_from", _json(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_memories"),
        sa.UniqueConstraint("tenant_id", "idempotency_key", name="uq_memories_tenant_id_idempotency_key"),
    )
    op.create_index("ix_memories_tenant_id_owner_id_status", "memories", ["tenant_id", "owner_id", "status"])
    op.create_index("ix_memories_tenant_id_scope_slot_status", "memories", ["tenant_id", "scope", "slot", "status"])
    op.create_index("ix_memories_tenant_id_created_at_id", "memories", ["tenant_id", "created_at", "id"])

    op.create_table(
        "candidates",
        sa.Column("ref", sa.String(), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("expires_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("ref", name="pk_candidates"),
    )
    op.create_index("ix_candidates_expires_at", "candidates", ["expires_at"])

    op.create_table(
        "audit_events",
        sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("operation", sa.String(), nullable=False),
        sa.Column("memory_id", sa.String(), nullable=True),
        sa.Column("namespace", sa.String(), nullable=True),
        sa.Column("reason", sa.String(), nullable=True),
        sa.Column("policy_version", sa.String(), nullable=False),
        sa.Column("workflow_id", sa.String(), nullable=True),
        sa.Column("deletion_id", sa.String(), nullable=True),
        sa.Column("details", sa.JSON(none_as_null=True), nullable=False),
        sa.Column("hash_before", sa.String(64), nullable=True),
        sa.Column("hash_after", sa.String(64), nullable=True),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_audit_events"),
        sa.UniqueConstraint("id", name="uq_audit_events_id"),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_audit_events_tenant_id_seq", "audit_events", ["tenant_id", "seq"])
    op.create_index("ix_audit_events_tenant_id_memory_id_seq", "audit_events", ["tenant_id", "memory_id", "seq"])

    op.create_table(
        "deletions",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("requester", sa.String(), nullable=False),
        sa.Column("selector", _json(), nullable=False),
        sa.Column("reason", sa.String(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("subject_hash", sa.String(64), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("completed_at", UTCDateTime(), nullable=True),
        sa.Column("workflow_id", sa.String(), nullable=True),
        sa.Column("counts", _json(), nullable=True),
        sa.Column("receipt_hash", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_deletions"),
    )
    op.create_index("ix_deletions_tenant_id_created_at", "deletions", ["tenant_id", "created_at"])

    op.create_table(
        "deletion_sinks",
        sa.Column("deletion_id", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("method", sa.String(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("purged", sa.Integer(), server_default="0", nullable=False),
        sa.Column("verified_at", UTCDateTime(), nullable=True),
        sa.Column("evidence", _json(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.ForeignKeyConstraint(
            ["deletion_id"],
            ["deletions.id"],
            name="fk_deletion_sinks_deletion_id_deletions",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("deletion_id", "name", name="pk_deletion_sinks"),
    )

    op.create_table(
        "source_dependencies",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("system", sa.String(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("memory_id", sa.String(), nullable=False),
        sa.ForeignKeyConstraint(
            ["memory_id"],
            ["memories.id"],
            name="fk_source_dependencies_memory_id_memories",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("tenant_id", "system", "key", "memory_id", name="pk_source_dependencies"),
    )
    op.create_index(
        "ix_source_dependencies_tenant_id_system_key", "source_dependencies", ["tenant_id", "system", "key"]
    )

    op.create_table(
        "owner_settings",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("owner_id", sa.String(), nullable=False),
        sa.Column("memory_enabled", sa.Boolean(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "owner_id", name="pk_owner_settings"),
    )


def downgrade() -> None:
    op.drop_table("owner_settings")
    op.drop_index("ix_source_dependencies_tenant_id_system_key", table_name="source_dependencies")
    op.drop_table("source_dependencies")
    op.drop_table("deletion_sinks")
    op.drop_index("ix_deletions_tenant_id_created_at", table_name="deletions")
    op.drop_table("deletions")
    op.drop_index("ix_audit_events_tenant_id_memory_id_seq", table_name="audit_events")
    op.drop_index("ix_audit_events_tenant_id_seq", table_name="audit_events")
    op.drop_table("audit_events")
    op.drop_index("ix_candidates_expires_at", table_name="candidates")
    op.drop_table("candidates")
    op.drop_index("ix_memories_tenant_id_created_at_id", table_name="memories")
    op.drop_index("ix_memories_tenant_id_scope_slot_status", table_name="memories")
    op.drop_index("ix_memories_tenant_id_owner_id_status", table_name="memories")
    op.drop_table("memories")
