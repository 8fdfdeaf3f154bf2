"""subject keys: the per-person keys audit content hashes are made under

Revision ID: 0006_subject_keys
Revises: 0005_forget
Create Date: 2026-12-02

`subject_keys` holds one random key per person (named by their keyed hash), under which audit
events' content hashes are HMACs (memwarden.stores.content_keys); erasing the person deletes it.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memwarden.stores.sql_models import UTCDateTime

revision: str = "0006_subject_keys"
down_revision: str | Sequence[str] | None = "0005_forget"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "subject_keys",
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("subject_hash", sa.String(64), nullable=False),
        sa.Column("key", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("tenant_id", "subject_hash", name="pk_subject_keys"),
    )


def downgrade() -> None:
    op.drop_table("subject_keys")
