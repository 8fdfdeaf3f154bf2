"""imports: bulk imports, their parked lines and each line's outcome

Revision ID: 0009_imports
Revises: 0008_remediation
Create Date: 2026-12-03

`imports` is one row per import (who started it, as a keyed hash; the file's hash; how many lines);
`import_lines` parks each admitted line until ImportWorkflow decides it (the claim check: content never
enters history); `import_outcomes` records each line's decision once, keyed by (import, line).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from memwarden.stores.sql_models import UTCDateTime

revision: str = "0009_imports"
down_revision: str | Sequence[str] | None = "0008_remediation"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "imports",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("actor_hash", sa.String(), nullable=False),
        sa.Column("file_sha256", sa.String(64), nullable=False),
        sa.Column("total_lines", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("workflow_id", sa.String(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=True),
        sa.Column("completed_at", UTCDateTime(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_imports"),
    )
    op.create_table(
        "import_lines",
        sa.Column("import_id", sa.String(), nullable=False),
        sa.Column("line_no", sa.Integer(), nullable=False),
        sa.Column("tenant_id", sa.String(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("subject_hash", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("import_id", "line_no", name="pk_import_lines"),
    )
    op.create_index("ix_import_lines_tenant_id_subject_hash", "import_lines", ["tenant_id", "subject_hash"])
    op.create_table(
        "import_outcomes",
        sa.Column("import_id", sa.String(), nullable=False),
        sa.Column("line_no", sa.Integer(), nullable=False),
        sa.Column("decision", sa.String(16), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("field", sa.String(128), nullable=True),
        sa.Column("memory_id", sa.String(), nullable=True),
        sa.Column("pending_commit", sa.Text(), nullable=True),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("import_id", "line_no", name="pk_import_outcomes"),
    )
    op.create_index(
        "ix_import_outcomes_import_id_decision_line_no", "import_outcomes", ["import_id", "decision", "line_no"]
    )


def downgrade() -> None:
    op.drop_index("ix_import_outcomes_import_id_decision_line_no", table_name="import_outcomes")
    op.drop_table("import_outcomes")
    op.drop_index("ix_import_lines_tenant_id_subject_hash", table_name="import_lines")
    op.drop_table("import_lines")
    op.drop_table("imports")
