"""The durable store's tables, one SQLAlchemy Core metadata for SQLite and PostgreSQL alike.

These definitions are what the code queries; the Alembic migrations in `memwarden/migrations`
create them (a contract test checks the two never drift). Two portability rules shape them:
- datetimes are `UTCDateTime`: timezone-aware in, timezone-aware UTC out, on both dialects
  (SQLite has no time zone type, so UTC is stored naive and re-labelled on the way out);
- enums are plain strings (the Python enums validate them), so adding a value needs no migration.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect

NAMING_CONVENTION: dict[str, str] = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Deterministic constraint names, so later migrations (and SQLite batch mode) can refer to them."""

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


class UTCDateTime(sa.TypeDecorator[datetime]):
    """A timestamp that is timezone-aware UTC on the way in and on the way out, on every dialect."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("naive datetime: memwarden stores timezone-aware UTC only")
        value = value.astimezone(UTC)
        # SQLite stores text without an offset; always UTC keeps text order equal to time order.
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


def json_type() -> sa.types.TypeEngine[Any]:
    """JSON on SQLite, JSONB on PostgreSQL; Python None is SQL NULL, not the JSON literal null."""
    return sa.JSON(none_as_null=True).with_variant(postgresql.JSONB(none_as_null=True), "postgresql")


def exact_json_type() -> sa.types.TypeEngine[Any]:
    """JSON kept as written (PostgreSQL `json`, not `jsonb`): for hashed audit details."""
    return sa.JSON(none_as_null=True)


memories = sa.Table(
    "memories",
    metadata,
    sa.Column("id", sa.String(), primary_key=True),
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
    sa.Column("source_ref", json_type(), nullable=True),
    sa.Column("provenance", json_type(), nullable=False),
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
    sa.Column("derived_from", json_type(), nullable=True),
    # "scope|agent|store|slot" while the memory is live (active or stale), NULL otherwise: the unique
    # index below then means "one live value per slot per namespace", enforced by the database itself.
    sa.Column("live_slot", sa.String(), nullable=True),
    sa.UniqueConstraint("tenant_id", "idempotency_key"),
    sa.Index("uq_memories_live_slot", "tenant_id", "owner_id", "live_slot", unique=True),
    sa.Index(None, "tenant_id", "owner_id", "status"),
    sa.Index(None, "tenant_id", "scope", "slot", "status"),
    sa.Index(None, "tenant_id", "created_at", "id"),
)

candidates = sa.Table(
    "candidates",
    metadata,
    sa.Column("ref", sa.String(), primary_key=True),
    sa.Column("tenant_id", sa.String(), nullable=False),
    sa.Column("content", sa.Text(), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("expires_at", UTCDateTime(), nullable=False),
    sa.Index(None, "expires_at"),
)

audit_events = sa.Table(
    "audit_events",
    metadata,
    sa.Column(
        "seq",
        sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
        primary_key=True,
        autoincrement=True,
    ),
    sa.Column("id", sa.String(), nullable=False, unique=True),
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
    sa.Column("details", exact_json_type(), nullable=False),
    sa.Column("hash_before", sa.String(64), nullable=True),
    sa.Column("hash_after", sa.String(64), nullable=True),
    sa.Column("prev_hash", sa.String(64), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
    sa.Index(None, "tenant_id", "seq"),
    sa.Index(None, "tenant_id", "memory_id", "seq"),
    sa.Index(None, "tenant_id", "deletion_id"),
    sa.Index(None, "tenant_id", "actor", "seq"),
    sqlite_autoincrement=True,  # seq is never reused, even if the last row were removed
)

audit_checkpoints = sa.Table(
    "audit_checkpoints",
    metadata,
    sa.Column("seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=False),
    sa.Column("head_hash", sa.String(64), nullable=False),
    sa.Column("event_count", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
    sa.Column("prev_seq", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
    sa.Column("at", UTCDateTime(), nullable=False),
    sa.Column("key_id", sa.String(32), nullable=False),
    sa.Column("signature", sa.String(128), nullable=False),
)
"""Signed chain heads (see memwarden/audit_signing.py): `seq` is the audit event the checkpoint ends at."""

deletions = sa.Table(
    "deletions",
    metadata,
    sa.Column("id", sa.String(), primary_key=True),
    sa.Column("tenant_id", sa.String(), nullable=False),
    sa.Column("requester", sa.String(), nullable=False),
    sa.Column("selector", json_type(), nullable=False),
    sa.Column("reason", sa.String(), nullable=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("subject_hash", sa.String(64), nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    sa.Column("completed_at", UTCDateTime(), nullable=True),
    sa.Column("workflow_id", sa.String(), nullable=True),
    sa.Column("counts", json_type(), nullable=True),
    sa.Column("receipt_hash", sa.String(64), nullable=True),
    sa.Column("selector_key", sa.String(64), nullable=True),
    sa.Column("cache_prefixes", json_type(), nullable=True),
    sa.Column("audit_event_id", sa.String(), nullable=True),
    sa.Index(None, "tenant_id", "created_at"),
    sa.Index(None, "tenant_id", "selector_key"),
)

deletion_sinks = sa.Table(
    "deletion_sinks",
    metadata,
    sa.Column(
        "deletion_id",
        sa.String(),
        sa.ForeignKey("deletions.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("name", sa.String(), primary_key=True),
    sa.Column("method", sa.String(), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("purged", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("verified_at", UTCDateTime(), nullable=True),
    sa.Column("evidence", json_type(), nullable=True),
    sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("workflow_id", sa.String(), nullable=True),
    sa.Column("run_id", sa.String(), nullable=True),
    sa.Column("started_at", UTCDateTime(), nullable=True),
)

deletion_members = sa.Table(
    "deletion_members",
    metadata,
    sa.Column(
        "deletion_id",
        sa.String(),
        sa.ForeignKey("deletions.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("memory_id", sa.String(), primary_key=True),
    sa.Column("tenant_id", sa.String(), nullable=False),
    sa.Column("prior_status", sa.String(16), nullable=False),
    sa.Index(None, "tenant_id", "memory_id"),
)
"""Which memories one deletion covers: the lineage each sink purges (ids only, no person's id)."""

quarantined_sources = sa.Table(
    "quarantined_sources",
    metadata,
    sa.Column("tenant_id", sa.String(), primary_key=True),
    sa.Column("system", sa.String(), primary_key=True),
    sa.Column("key", sa.String(), primary_key=True),
    sa.Column("deletion_id", sa.String(), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)
"""Source records forgotten as poisoned: the write gate refuses new memories citing them."""

source_dependencies = sa.Table(
    "source_dependencies",
    metadata,
    sa.Column("tenant_id", sa.String(), primary_key=True),
    sa.Column("system", sa.String(), primary_key=True),
    sa.Column("key", sa.String(), primary_key=True),
    sa.Column(
        "memory_id",
        sa.String(),
        sa.ForeignKey("memories.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Index(None, "tenant_id", "system", "key"),
)

owner_settings = sa.Table(
    "owner_settings",
    metadata,
    sa.Column("tenant_id", sa.String(), primary_key=True),
    sa.Column("owner_id", sa.String(), primary_key=True),
    sa.Column("memory_enabled", sa.Boolean(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
)

imports = sa.Table(
    "imports",
    metadata,
    sa.Column("id", sa.String(), primary_key=True),
    sa.Column("tenant_id", sa.String(), nullable=False),
    # The starter as the audit log names them (a keyed hash): who may read the import, no person's id.
    sa.Column("actor_hash", sa.String(), nullable=False),
    sa.Column("file_sha256", sa.String(64), nullable=False),
    sa.Column("total_lines", sa.Integer(), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("workflow_id", sa.String(), nullable=True),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("started_at", UTCDateTime(), nullable=True),
    sa.Column("completed_at", UTCDateTime(), nullable=True),
)

import_lines = sa.Table(
    "import_lines",
    metadata,
    # The claim check of one line waiting for ImportWorkflow: its admitted input and content (JSON).
    # Deleted in the transaction that records the line's outcome.
    sa.Column("import_id", sa.String(), primary_key=True),
    sa.Column("line_no", sa.Integer(), primary_key=True),
    sa.Column("tenant_id", sa.String(), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("payload", sa.Text(), nullable=False),
    # The owner's handle hash (memwarden.stores.subjects): erasing the owner drops their parked lines.
    sa.Column("subject_hash", sa.String(64), nullable=True),
    sa.Index(None, "tenant_id", "subject_hash"),
)

import_outcomes = sa.Table(
    "import_outcomes",
    metadata,
    # What became of each line, once: codes and ids, never content. The key makes a line applied at most once.
    sa.Column("import_id", sa.String(), primary_key=True),
    sa.Column("line_no", sa.Integer(), primary_key=True),
    sa.Column("decision", sa.String(16), nullable=False),
    sa.Column("reason", sa.String(64), nullable=False),
    sa.Column("field", sa.String(128), nullable=True),
    sa.Column("memory_id", sa.String(), nullable=True),
    # A PENDING line's sealed CommitInput (ids, codes and a subject handle; no content), so whichever
    # attempt of a batch committed it, the workflow starts its confirmation window.
    sa.Column("pending_commit", sa.Text(), nullable=True),
    sa.Column("at", UTCDateTime(), nullable=False),
    sa.Index(None, "import_id", "decision", "line_no"),
)

rollbacks = sa.Table(
    "rollbacks",
    metadata,
    sa.Column("id", sa.String(), primary_key=True),
    sa.Column("tenant_id", sa.String(), nullable=False),
    sa.Column("requester", sa.String(), nullable=False),
    sa.Column("selector", json_type(), nullable=False),
    sa.Column("reason", sa.String(), nullable=False),
    sa.Column("store", sa.String(), nullable=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), nullable=False),
    sa.Column("completed_at", UTCDateTime(), nullable=True),
    sa.Column("workflow_id", sa.String(), nullable=False),
    sa.Column("counts", json_type(), nullable=True),
    sa.Column("cache_prefixes", json_type(), nullable=True),
    sa.Column("receipt_hash", sa.String(64), nullable=True),
    sa.Column("audit_event_id", sa.String(), nullable=True),
    sa.Index(None, "tenant_id", "created_at"),
)
"""A rollback of writes (a writer's window, a source record, listed ids): the quarantine is recorded with
it, synchronously; RollbackWorkflow restores, re-derives and fills in the receipt."""

rollback_members = sa.Table(
    "rollback_members",
    metadata,
    sa.Column("rollback_id", sa.String(), sa.ForeignKey("rollbacks.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("memory_id", sa.String(), primary_key=True),
    sa.Column("tenant_id", sa.String(), nullable=False),
    sa.Column("prior_status", sa.String(16), nullable=False),
    sa.Column("restored_id", sa.String(), nullable=True),
    sa.Column("outcome", sa.String(32), nullable=True),
    sa.Index(None, "tenant_id", "memory_id"),
)
"""Which memories one rollback quarantined, and what became of the value each superseded (ids only)."""

rollback_sinks = sa.Table(
    "rollback_sinks",
    metadata,
    sa.Column("rollback_id", sa.String(), sa.ForeignKey("rollbacks.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("name", sa.String(), primary_key=True),
    sa.Column("method", sa.String(), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("applied", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
    sa.Column("verified_at", UTCDateTime(), nullable=True),
    sa.Column("evidence", json_type(), nullable=True),
    sa.Column("workflow_id", sa.String(), nullable=True),
    sa.Column("run_id", sa.String(), nullable=True),
    sa.Column("started_at", UTCDateTime(), nullable=True),
)
