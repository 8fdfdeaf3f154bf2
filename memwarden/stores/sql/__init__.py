"""The durable store: the single source of truth for memory, on SQLite (embedded) or PostgreSQL.

One repository, `SqlStore`, over SQLAlchemy 2 async Core, with the same tables and Alembic migrations on
both dialects. It is composed of one part per concern, each in its own module:
- `engine`: engines, connections, transactions, migrations; everything SQLite and PostgreSQL differ in;
- `memories`: memory rows by id, key and slot, the commit that supersedes a slot's holder, status changes;
- `read_filters`: a `ReadFilter` as one WHERE clause, and the reads that go through it;
- `imports`: bulk imports, their parked lines and each line's outcome (applied at most once);
- `claim_checks`: content in flight, parked by reference so workflow history never holds it;
- `owner_settings`: the per-owner memory switch;
- `audit_log`: the hash-chained audit log, its signed checkpoints and its verification;
- `rows`, `cursors`, `statements`: the record <-> row mapping, keyset cursors, prebuilt statements.

What it guarantees:
- authorization is evaluated *in SQL*: a `ReadFilter` becomes one WHERE clause (`read_filter_clause`),
  the same clause wherever it is asked;
- writes are serialized where they must be: every SQLite write transaction is `BEGIN IMMEDIATE` (the
  database write lock, across processes), and the audit chain and migrations take PostgreSQL advisory
  locks, so the hash chain never forks and two processes may migrate at once;
- ids, hashes and counts only in errors and logs; never content.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from memwarden.audit_signing import CheckpointSigner
from memwarden.config import Settings
from memwarden.forget import subject_key
from memwarden.stores.audit import Pseudonymizer
from memwarden.stores.content_keys import ContentKeys
from memwarden.stores.sql.claim_checks import ClaimChecks
from memwarden.stores.sql.engine import MIGRATIONS_DIR, SqlEngine, create_engine
from memwarden.stores.sql.imports import ImportRows
from memwarden.stores.sql.memories import ConcurrencyConflict, _mark_superseded
from memwarden.stores.sql.owner_settings import OwnerSettings
from memwarden.stores.sql.read_filters import EligibleMeta, FilteredReads, by_ids_statement, read_filter_clause
from memwarden.stores.sql.rows import _record_to_row, _row_to_record, _select_memory, live_slot_key, slot_key

__all__ = [
    "MIGRATIONS_DIR",
    "ConcurrencyConflict",
    "EligibleMeta",
    "SqlStore",
    "_mark_superseded",
    "_record_to_row",
    "_row_to_record",
    "_select_memory",
    "by_ids_statement",
    "live_slot_key",
    "open_store",
    "read_filter_clause",
    "slot_key",
]


class SqlStore(ImportRows, FilteredReads, ClaimChecks, OwnerSettings):
    """Async repository over the durable store; open with `SqlStore.open(url)`, then `migrate()`.

    Its parts share one engine and one set of transactions: a method of one part may append an audit
    event or drop a claim check inside its own transaction, so no operation costs an extra one.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        *,
        audit_signer: CheckpointSigner | None = None,
        checkpoint_every: int = 256,
        audit_pseudonyms: Pseudonymizer | None = None,
    ) -> None:
        if checkpoint_every < 1:
            raise ValueError("checkpoint_every must be at least 1")
        SqlEngine.__init__(self, engine)
        self._signer = audit_signer
        self._checkpoint_every = checkpoint_every
        self._pseudonyms = audit_pseudonyms
        self.content_keys = ContentKeys(self, audit_pseudonyms)
        """Keys audit events' content hashes per subject (memwarden.stores.content_keys)."""

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        schema: str | None = None,
        audit_signer: CheckpointSigner | None = None,
        checkpoint_every: int = 256,
        audit_pseudonyms: Pseudonymizer | None = None,
    ) -> SqlStore:
        """Create the engine for an async URL (sqlite+aiosqlite or postgresql+asyncpg).

        `schema` (PostgreSQL only) puts every table in that schema via the search_path: tests
        use it for isolation, deployments may use it to share a database. `audit_signer` signs a
        checkpoint of the audit chain head every `checkpoint_every` events; `audit_pseudonyms` turns
        the person ids in every appended event (actor, namespace) into keyed hashes.
        """
        engine = await create_engine(url, schema=schema)
        return cls(
            engine, audit_signer=audit_signer, checkpoint_every=checkpoint_every, audit_pseudonyms=audit_pseudonyms
        )


async def open_store(settings: Settings) -> SqlStore:
    """The store as the API, the worker and the CLI open it: the settings' audit signer, and person ids
    in audit events hashed under the subject key (the receipts' scheme)."""
    return await SqlStore.open(
        settings.database_url or "",
        audit_signer=settings.audit_signer,
        checkpoint_every=settings.audit_checkpoint_every,
        audit_pseudonyms=Pseudonymizer(subject_key(settings.auth_secret_value)),
    )
