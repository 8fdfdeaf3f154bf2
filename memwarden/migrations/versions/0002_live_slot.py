"""one live value per slot: a live_slot column under a unique index

Revision ID: 0002_live_slot
Revises: 0001_initial
Create Date: 2026-12-01

NULLs never collide in a unique index (SQLite and PostgreSQL alike), so only live rows with a slot
take part; concurrent writers to one slot cannot both commit a live value.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002_live_slot"
down_revision: str | Sequence[str] | None = "0001_initial"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("memories", sa.Column("live_slot", sa.String(), nullable=True))
    op.execute(
        "UPDATE memories SET live_slot = scope || '|' || COALESCE(agent_id, '') || '|' || COALESCE(store, '')"
        " || '|' || slot WHERE slot IS NOT NULL AND status IN ('active', 'stale')"
    )
    op.create_index("uq_memories_live_slot", "memories", ["tenant_id", "owner_id", "live_slot"], unique=True)


def downgrade() -> None:
    op.drop_index("uq_memories_live_slot", table_name="memories")
    with op.batch_alter_table("memories") as batch:
        batch.drop_column("live_slot")
