"""audit checkpoints: signed (Ed25519) heads of the audit hash chain

Revision ID: 0004_audit_checkpoints
Revises: 0002_live_slot
Create Date: 2026-12-01

A checkpoint row names the audit event it ends at (`seq`), that event's hash, how many events
the chain held then, the previous checkpoint's seq, and an Ed25519 signature over all of it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memwarden.stores.sql_models import UTCDateTime

revision: str = "0004_audit_checkpoints"
down_revision: str | Sequence[str] | None = "0002_live_slot"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _bigint() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "audit_checkpoints",
        sa.Column("seq", _bigint(), nullable=False, autoincrement=False),
        sa.Column("head_hash", sa.String(64), nullable=False),
        sa.Column("event_count", _bigint(), nullable=False),
        sa.Column("prev_seq", _bigint(), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.Column("key_id", sa.String(32), nullable=False),
        sa.Column("signature", sa.String(128), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_audit_checkpoints"),
    )
    op.create_index("ix_audit_events_tenant_id_deletion_id", "audit_events", ["tenant_id", "deletion_id"])
    op.create_index("ix_audit_events_tenant_id_actor_seq", "audit_events", ["tenant_id", "actor", "seq"])


def downgrade() -> None:
    op.drop_index("ix_audit_events_tenant_id_actor_seq", table_name="audit_events")
    op.drop_index("ix_audit_events_tenant_id_deletion_id", table_name="audit_events")
    op.drop_table("audit_checkpoints")
