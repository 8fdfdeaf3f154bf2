"""remediation: rollbacks of writes, their quarantined members and per-sink evidence

Revision ID: 0008_remediation
Revises: 0006_subject_keys
Create Date: 2026-12-03

`rollbacks` records one rollback (a writer's window, a source record or listed ids; the selector
redacted), `rollback_members` the memories it quarantined and the version that restored each one's
predecessor, `rollback_sinks` each derivative's apply-and-check evidence, as a deletion's sinks do.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from memwarden.stores.sql_models import UTCDateTime

revision: str = "0008_remediation"
down_revision: str | Sequence[str] | None = "0006_subject_keys"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _json() -> sa.types.TypeEngine[object]:
    return sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def upgrade() -> None:
    op.create_table(
        "rollbacks",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("requester", sa.String(), nullable=False),
        sa.Column("selector", _json(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("store", sa.String(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.Column("completed_at", UTCDateTime(), nullable=True),
        sa.Column("workflow_id", sa.String(), nullable=False),
        sa.Column("counts", _json(), nullable=True),
        sa.Column("cache_prefixes", _json(), nullable=True),
        sa.Column("receipt_hash", sa.String(64), nullable=True),
        sa.Column("audit_event_id", sa.String(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_rollbacks"),
    )
    op.create_index("ix_rollbacks_tenant_id_created_at", "rollbacks", ["tenant_id", "created_at"])
    op.create_table(
        "rollback_members",
        sa.Column("rollback_id", sa.String(), nullable=False),
        sa.Column("memory_id", sa.String(), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("prior_status", sa.String(16), nullable=False),
        sa.Column("restored_id", sa.String(), nullable=True),
        sa.Column("outcome", sa.String(32), nullable=True),
        sa.ForeignKeyConstraint(
            ["rollback_id"], ["rollbacks.id"], name="fk_rollback_members_rollback_id_rollbacks", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("rollback_id", "memory_id", name="pk_rollback_members"),
    )
    op.create_index("ix_rollback_members_tenant_id_memory_id", "rollback_members", ["tenant_id", "memory_id"])
    op.create_table(
        "rollback_sinks",
        sa.Column("rollback_id", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("method", sa.String(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("applied", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("verified_at", UTCDateTime(), nullable=True),
        sa.Column("evidence", _json(), nullable=True),
        sa.Column("workflow_id", sa.String(), nullable=True),
        sa.Column("run_id", sa.String(), nullable=True),
        sa.Column("started_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["rollback_id"], ["rollbacks.id"], name="fk_rollback_sinks_rollback_id_rollbacks", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("rollback_id", "name", name="pk_rollback_sinks"),
    )


def downgrade() -> None:
    op.drop_table("rollback_sinks")
    op.drop_index("ix_rollback_members_tenant_id_memory_id", table_name="rollback_members")
    op.drop_table("rollback_members")
    op.drop_index("ix_rollbacks_tenant_id_created_at", table_name="rollbacks")
    op.drop_table("rollbacks")
