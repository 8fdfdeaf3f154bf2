"""The durable store: the single source of truth for memory, on SQLite (embedded) or PostgreSQL.

One repository, `SqlStore`, over SQLAlchemy 2 async Core, with the same tables and Alembic
migrations on both dialects. What it guarantees:
- authorization is evaluated *in SQL*: a `ReadFilter` becomes one WHERE clause
  (`read_filter_clause`, bound once per filter shape by `by_ids_statement` for the hot re-checks of
  index hits: `eligible`, `eligible_meta`, `answer_search`), the same clause wherever it is asked;
- writes are serialized where they must be: every SQLite write transaction is `BEGIN IMMEDIATE`
  (the database write lock, across processes), and the audit chain and migrations take
  PostgreSQL advisory locks, so the hash chain never forks and two processes may migrate at once;
- ids, hashes and counts only in errors and logs; never content.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import itertools
import json
import logging
import threading
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, RowMapping, make_url
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.sql.elements import ColumnElement

from memwarden.audit_signing import Checkpoint, CheckpointSigner, CheckpointVerifier
from memwarden.config import Settings
from memwarden.forget import subject_key
from memwarden.records import (
    CONTENT_GONE_STATUSES,
    MemoryRecord,
    MemoryType,
    ReadFilter,
    Status,
    check_transition,
    sensitivity_rank,
)
from memwarden.stores import sql_statements as Q
from memwarden.stores.audit import (
    GENESIS_HASH,
    AuditEvent,
    AuditEventIn,
    AuditVerification,
    Operation,
    Pseudonymizer,
    chain_hash,
    namespace_label,
)
from memwarden.stores.sql_models import (
    audit_checkpoints,
    audit_events,
    candidates,
    memories,
    owner_settings,
)
from memwarden.stores.sqlite_inline import inline_creator

_log = logging.getLogger("memwarden.audit")

MIGRATIONS_DIR = Path(__file__).resolve().parent.parent / "migrations"

_IMMEDIATE = "memwarden_sqlite_immediate"
"""Execution option: open this SQLite transaction with BEGIN IMMEDIATE (take the write lock now)."""
_AUTOCOMMIT_READ = "memwarden_sqlite_autocommit_read"
"""Execution option: a read of one statement (or of independent chunks) runs in SQLite's autocommit mode.
A single SELECT is its own consistent snapshot; the explicit BEGIN cost a statement round trip per read
(~0.1 ms here, and a GIL release the event loop waits behind, see `memwarden.randomness`)."""

_MIGRATE_LOCK_KEY = 0x6D77_6D69_6772_6174
"""pg_advisory_xact_lock key held while migrating ("mwmigrat")."""
_AUDIT_LOCK_KEY = 0x6D77_6175_6469_7400
"""pg_advisory_xact_lock key that serializes appends to the audit chain ("mwaudit")."""

_CHUNK = 500
"""Ids per IN (...) list: far below SQLite's and asyncpg's bound-parameter limits."""
_VERIFY_BATCH = 1000
_MIGRATE_SQLITE_ATTEMPTS = 12
"""Attempts, each waiting up to the 5 s busy timeout: about a minute for another process's migration."""
_PING_TIMEOUT = 2.0

_RECORD_FIELDS: tuple[str, ...] = tuple(MemoryRecord.model_fields)
_AUDIT_FIELDS: tuple[str, ...] = tuple(AuditEventIn.model_fields)
_AUDIT_BATCH = 500
"""Events per INSERT (and per id lookup) in `append_audit_many`."""


@dataclass(frozen=True)
class EligibleMeta:
    """What ranking needs of an eligible memory (no content)."""

    status: Status
    created_at: datetime
    importance: float
    last_confirmed_at: datetime | None
    type: MemoryType = MemoryType.FACT
    source_system: str | None = None
    """The memory's system of record (source_ref.system), so Retrieve can tell which hits to revalidate."""
    source_key: str | None = None
    source_version: str | None = None
    version: int = 0
    """The row's version when ranked: a read-time check applies only if the row is still that version."""
    """source_ref.key and .version: enough to ask the source while the full row is still being read."""
    owner_id: str = ""
    session: str | None = None
    """provenance.session and .turn: the conversation context ranking uses (ids, never content)."""
    turn: str | None = None
    speaker: str | None = None
    """provenance.speaker, for ranking's "the query names who said it" (compared in the activity, never
    returned or recorded)."""


_M = memories.c
_META_COLUMNS = (
    _M.id,
    _M.status,
    _M.created_at,
    _M.importance,
    _M.last_confirmed_at,
    _M.type,
    _M.source_ref["system"].as_string().label("source_system"),
    _M.source_ref["key"].as_string().label("source_key"),
    _M.source_ref["version"].as_string().label("source_version"),
    _M.version,
    _M.owner_id,
    _M.provenance["session"].as_string().label("session"),
    _M.provenance["turn"].as_string().label("turn"),
    _M.provenance["speaker"].as_string().label("speaker"),
)
"""What `eligible_meta` reads: the id and `EligibleMeta`'s fields, never content."""
_STATUSES = {s.value: s for s in Status}
_TYPES = {t.value: t for t in MemoryType}
"""Stored values to their enums by dict lookup (an Enum call per row and column costs ~1 us each)."""


class ConcurrencyConflict(Exception):
    """The memory changed since the caller read it (optimistic concurrency on `version`)."""

    def __init__(self, memory_id: str, expected: int | None, actual: int | None) -> None:
        super().__init__(f"memory {memory_id}: expected version {expected}, found {actual}")
        self.memory_id = memory_id
        self.expected = expected
        self.actual = actual


class SqlStore:
    """Async repository over the durable store; open with `SqlStore.open(url)`, then `migrate()`."""

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
        self._engine = engine
        self._ephemeral: AsyncEngine | None = None
        """SQLite only: connections with synchronous=NORMAL, for writes that need not survive a power cut."""
        self._signer = audit_signer
        self._checkpoint_every = checkpoint_every
        self._pseudonyms = audit_pseudonyms
        self._write_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    # -- lifecycle -------------------------------------------------------------------------

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
        sa_url = make_url(url)
        backend = sa_url.get_backend_name()
        if backend == "sqlite":
            if schema is not None:
                raise ValueError("schema is a PostgreSQL option")
            if sa_url.drivername == "sqlite":
                sa_url = sa_url.set(drivername="sqlite+aiosqlite")
            database = sa_url.database or ""
            if database in ("", ":memory:") or database.startswith("file:"):
                raise ValueError("SQLite needs a file path (in-memory databases are per-connection)")
            await asyncio.to_thread(_ensure_parent_dir, database)
            # Statements run on the event loop's thread unless they may wait (memwarden.stores.sqlite_inline).
            engine = create_async_engine(sa_url, async_creator=inline_creator(database, durable=True))
            event.listen(engine.sync_engine, "connect", _sqlite_on_connect)
            event.listen(engine.sync_engine, "begin", _sqlite_on_begin)
            ephemeral = create_async_engine(sa_url, async_creator=inline_creator(database, durable=False))
            event.listen(ephemeral.sync_engine, "connect", _sqlite_on_connect_ephemeral)
            event.listen(ephemeral.sync_engine, "begin", _sqlite_on_begin)
        elif backend == "postgresql":
            if sa_url.drivername == "postgresql":
                sa_url = sa_url.set(drivername="postgresql+asyncpg")
            connect_args: dict[str, Any] = {}
            if schema is not None:
                connect_args["server_settings"] = {"search_path": schema}
            engine = create_async_engine(
                sa_url,
                pool_size=5,
                max_overflow=5,
                pool_pre_ping=True,
                pool_recycle=1800,
                connect_args=connect_args,
            )
        else:
            raise ValueError(f"unsupported database backend: {backend}")
        store = cls(
            engine, audit_signer=audit_signer, checkpoint_every=checkpoint_every, audit_pseudonyms=audit_pseudonyms
        )
        if backend == "sqlite":
            store._ephemeral = ephemeral
        return store

    @property
    def engine(self) -> AsyncEngine:
        """The underlying engine, for code that needs a query this repository does not offer."""
        return self._engine

    @property
    def dialect(self) -> str:
        """'sqlite' or 'postgresql': the few places that differ (upserts, locks) branch on it."""
        return self._engine.dialect.name

    async def migrate(self) -> None:
        """Upgrade to the newest schema; a no-op when current; safe from several processes at once.

        Three locks: one per process around Alembic (its `context`/`op` are process globals, so
        two migrations interleaving on one event loop would cross wires), then the database's
        own: PostgreSQL's advisory transaction lock, or SQLite's write lock (BEGIN IMMEDIATE),
        taken before Alembic reads the version table. A SQLite lock wait that outlasts the busy
        timeout (another process running a long migration) is retried.
        """
        async with _alembic_guard():
            for attempt in range(_MIGRATE_SQLITE_ATTEMPTS):
                try:
                    async with self._write() as conn:
                        if self.dialect == "postgresql":
                            await conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATE_LOCK_KEY})
                        else:
                            await conn.execute(sa.text("SELECT 1"))  # BEGIN IMMEDIATE happens here
                        await conn.run_sync(_upgrade_head)
                    return
                except OperationalError as exc:
                    locked = self.dialect == "sqlite" and "locked" in str(exc.orig)
                    if not locked or attempt == _MIGRATE_SQLITE_ATTEMPTS - 1:
                        raise

    async def close(self) -> None:
        await self._engine.dispose()
        if self._ephemeral is not None:
            await self._ephemeral.dispose()

    async def ping(self) -> bool:
        """Readiness: True when a trivial query answers within `_PING_TIMEOUT` seconds."""
        try:
            async with asyncio.timeout(_PING_TIMEOUT), self._engine.connect() as conn:
                await conn.execute(sa.text("SELECT 1"))
        except Exception:  # any failure means "not ready"; callers only need the boolean
            return False
        return True

    @asynccontextmanager
    async def _read(self, *, single_statement: bool = False) -> AsyncIterator[AsyncConnection]:
        """A read connection; `single_statement`: the caller runs one statement (or chunks that need no
        common snapshot), so on SQLite no transaction is opened for it."""
        async with self._engine.connect() as conn:
            if single_statement:
                await conn.execution_options(**{_AUTOCOMMIT_READ: True})
            yield conn

    @asynccontextmanager
    async def _write(self, *, durable: bool = True) -> AsyncIterator[AsyncConnection]:
        """One write transaction; on SQLite it holds the write lock from its first statement.

        SQLite has one writer at a time. Writers of this process queue on an asyncio lock first, so the
        next one starts the moment the last commits; left to SQLite's busy handler they would each sleep
        in steps of up to 100 ms in a pool thread and, under load, wait out the busy timeout. Other
        processes are still kept out by BEGIN IMMEDIATE and the busy timeout.

        `durable=False`: the commit may be lost in a power cut (never in a process crash), and in
        exchange does not wait for the disk: SQLite commits on a synchronous=NORMAL connection (the
        WAL is not fsynced; the next durable commit's fsync covers it), PostgreSQL with
        `synchronous_commit = off` for this transaction only. Only for rows that are worthless after
        a restart anyway (a search query parked for the few milliseconds of its search).
        """
        if self.dialect != "sqlite":
            async with self._engine.connect() as conn, conn.begin():
                if not durable:
                    await conn.execute(sa.text("SET LOCAL synchronous_commit TO OFF"))
                yield conn
            return
        engine = self._engine if durable or self._ephemeral is None else self._ephemeral
        async with self._write_lock(), engine.connect() as conn:
            await conn.execution_options(**{_IMMEDIATE: True})
            async with conn.begin():
                yield conn

    def _write_lock(self) -> asyncio.Lock:
        """This event loop's SQLite writer lock (a store may outlive one loop, as in tests)."""
        loop = asyncio.get_running_loop()
        lock = self._write_locks.get(loop)
        if lock is None:
            lock = self._write_locks[loop] = asyncio.Lock()
        return lock

    def transaction(self) -> Any:
        """One write transaction (SQLite: holding the write lock), for repositories built on this store."""
        return self._write()

    def insert(self, table: sa.Table) -> sqlite.Insert | postgresql.Insert:
        """The dialect's INSERT with ON CONFLICT, for repositories built on this store."""
        return self._insert(table)

    def _insert(self, table: sa.Table) -> sqlite.Insert | postgresql.Insert:
        """The dialect's INSERT, which has ON CONFLICT on both SQLite and PostgreSQL."""
        return postgresql.insert(table) if self.dialect == "postgresql" else sqlite.insert(table)

    # -- claim check -----------------------------------------------------------------------

    async def put_candidate(
        self, ref: str, tenant_id: str, content: str, expires_at: datetime, *, durable: bool = True
    ) -> None:
        """Park content in flight so workflow payloads carry only `ref`; re-putting a ref replaces it.

        `durable=False` for a search query: it lives for one search, and waiting for the disk (an
        fsync, 0.5 ms here and several under load) bought nothing but latency (see `_write`).
        """
        await self.put_candidates([(ref, tenant_id, content, expires_at)], durable=durable)

    async def put_candidates(self, rows: Sequence[tuple[str, str, str, datetime]], *, durable: bool = True) -> None:
        """`put_candidate` for several (ref, tenant, content, expires_at) in one transaction (one fsync):
        a write parks its content and its subject handle together."""
        upsert = Q.upsert_candidate(self.dialect)
        async with self._write(durable=durable) as conn:
            for ref, tenant_id, content, expires_at in rows:
                params = {
                    "ref": ref,
                    "tenant_id": tenant_id,
                    "content": content,
                    "created_at": _utcnow(),
                    "expires_at": expires_at,
                }
                result = await conn.execute(upsert, params)
                if result.rowcount != 1:
                    raise ValueError(f"candidate ref {ref} belongs to another tenant")

    async def get_candidate(self, ref: str) -> str | None:
        """The parked content, or None when absent or past its `expires_at`."""
        async with self._read(single_statement=True) as conn:
            return await conn.scalar(Q.CANDIDATE_CONTENT, {"ref": ref, "now": _utcnow()})

    async def delete_candidate(self, ref: str) -> None:
        """Drop parked content once it is committed or rejected (idempotent)."""
        async with self._write() as conn:
            await conn.execute(Q.DELETE_CANDIDATE, {"ref": ref})

    async def delete_expired_candidates(self, now: datetime) -> int:
        """Sweep parked content whose workflow never came back for it; returns how many went."""
        async with self._write() as conn:
            result = await conn.execute(sa.delete(candidates).where(candidates.c.expires_at <= now))
            return result.rowcount

    # -- memories --------------------------------------------------------------------------

    async def insert_memory(
        self,
        record: MemoryRecord,
        *,
        idempotency_key: str | None = None,
        derived_from: list[str] | None = None,
    ) -> MemoryRecord:
        """Insert a memory; idempotent for retried activities.

        The same id again (or the same idempotency key in the tenant) returns the row already
        stored, unchanged, without error.
        """
        values = _record_to_row(record)
        values["idempotency_key"] = idempotency_key
        values["derived_from"] = list(derived_from) if derived_from is not None else None
        stmt = self._insert(memories).values(**values).on_conflict_do_nothing().returning(*memories.c)
        async with self._write() as conn:
            inserted = (await conn.execute(stmt)).mappings().first()
            if inserted is not None:
                return _row_to_record(inserted)
            existing = await _select_memory(conn, record.tenant_id, record.id)
            if existing is None and idempotency_key is not None:
                existing = await _select_by_key(conn, record.tenant_id, idempotency_key)
            if existing is None:
                raise ValueError(f"memory id {record.id} is taken in another tenant")
            return existing

    async def bulk_insert_memories(self, records: Sequence[MemoryRecord]) -> int:
        """Insert many new memories in one transaction (benchmarks and imports; no gate, no audit).

        Ids already present are skipped, so a repeated load is harmless; returns how many were new.
        """
        if not records:
            return 0
        rows = [_record_to_row(r) | {"idempotency_key": None, "derived_from": None} for r in records]
        inserted = 0
        async with self._write() as conn:
            for start in range(0, len(rows), _CHUNK):
                chunk = rows[start : start + _CHUNK]
                result = await conn.execute(self._insert(memories).on_conflict_do_nothing(), chunk)
                inserted += max(result.rowcount, 0)
        return inserted

    async def live_slot_holder(
        self, tenant_id: str, owner_id: str, scope: str, agent_id: str | None, store: str | None, slot: str
    ) -> MemoryRecord | None:
        """The live (active or stale) memory holding this slot in this namespace, if any."""
        params = {"tenant_id": tenant_id, "owner_id": owner_id, "live_slot": slot_key(scope, agent_id, store, slot)}
        async with self._read() as conn:
            row = (await conn.execute(Q.SLOT_HOLDER, params)).mappings().first()
        return _row_to_record(row) if row is not None else None

    async def commit_live(
        self,
        record: MemoryRecord,
        *,
        idempotency_key: str | None = None,
        audit: Callable[[MemoryRecord], AuditEventIn] | None = None,
        drop_candidate: str | None = None,
        derived_from: list[str] | None = None,
    ) -> tuple[MemoryRecord, str | None]:
        """Make `record` the live memory, superseding whoever holds its slot now; one transaction.

        In the same transaction: the audit event `audit(live row)` is appended and the claim-checked
        content `drop_candidate` deleted, so a commit is never stored without its event, or the other way.

        Returns the live row and the id it superseded. Idempotent: a record already committed (by id
        or idempotency key) is returned as it is. A pending row with this id is promoted in place.
        Two writers racing for one slot cannot both win: the loser hits the live-slot unique index
        and gets `ConcurrencyConflict`; retried, it supersedes the winner, so the newest write holds
        the slot and the older one stays as history.
        """
        assert record.status in _LIVE, "commit_live makes a record live"
        m = memories.c
        try:
            async with self._write() as conn:
                existing = await _select_by_id_or_key(conn, record.tenant_id, record.id, idempotency_key)
                if existing is not None and existing.status is not Status.PENDING:
                    if drop_candidate is not None:
                        await conn.execute(Q.DELETE_CANDIDATE, {"ref": drop_candidate})
                    return existing, existing.supersedes
                superseded: str | None = None
                key = live_slot_key(record)
                if key is not None:
                    query = Q.SLOT_HOLDER_FOR_UPDATE if self.dialect == "postgresql" else Q.SLOT_HOLDER
                    params = {"tenant_id": record.tenant_id, "owner_id": record.owner_id, "live_slot": key}
                    holder_row = (await conn.execute(query, params)).mappings().first()
                    if holder_row is not None and holder_row["id"] != record.id:
                        holder = _row_to_record(holder_row)
                        check_transition(holder.status, Status.SUPERSEDED)
                        if not await _mark_superseded(conn, holder, by=record.id, at=record.updated_at):
                            raise ConcurrencyConflict(holder.id, holder.version, None)
                        superseded = holder.id
                live = record.model_copy(update={"supersedes": superseded})
                if existing is not None:  # a pending write, confirmed
                    check_transition(existing.status, live.status)
                    values = _record_to_row(live)
                    values["version"] = existing.version + 1
                    for column in ("id", "tenant_id", "created_at", "idempotency_key", "derived_from"):
                        values.pop(column, None)
                    await conn.execute(
                        sa.update(memories).where(m.id == existing.id, m.version == existing.version).values(**values)
                    )
                    stored = await _select_memory(conn, record.tenant_id, record.id)
                else:
                    values = _record_to_row(live)
                    values["idempotency_key"] = idempotency_key
                    values["derived_from"] = list(derived_from) if derived_from is not None else None
                    row = (await conn.execute(Q.INSERT_MEMORY, values)).mappings()
                    stored = _row_to_record(row.one())
                assert stored is not None
                if audit is not None:
                    await self._append_audit(conn, audit(stored))
                if drop_candidate is not None:
                    await conn.execute(Q.DELETE_CANDIDATE, {"ref": drop_candidate})
        except IntegrityError as exc:
            raise ConcurrencyConflict(record.id, None, None) from exc
        assert stored is not None
        return stored, superseded

    async def reject_pending(self, tenant_id: str, memory_id: str, now: datetime) -> MemoryRecord | None:
        """A staged write declined or timed out: `rejected`, and its content dropped (never accepted).

        Idempotent; None when absent. A row that is no longer pending is returned unchanged.
        """
        m = memories.c
        async with self._write() as conn:
            current = await _select_memory(conn, tenant_id, memory_id)
            if current is None or current.status is not Status.PENDING:
                return current
            await conn.execute(
                sa.update(memories)
                .where(m.id == memory_id, m.version == current.version)
                .values(status=Status.REJECTED.value, content=None, version=current.version + 1, updated_at=now)
            )
            return await _select_memory(conn, tenant_id, memory_id)

    async def stage_pending(
        self,
        record: MemoryRecord,
        *,
        idempotency_key: str | None,
        audit: Callable[[MemoryRecord], AuditEventIn],
        drop_candidate: str,
    ) -> MemoryRecord:
        """Store a write awaiting confirmation as `pending`, its audit event, and drop the claim check: one
        transaction. Idempotent: a row already stored under this id (or key) is kept as it is."""
        assert record.status is Status.PENDING
        values = _record_to_row(record)
        values["idempotency_key"] = idempotency_key
        values["derived_from"] = None
        stmt = self._insert(memories).values(**values).on_conflict_do_nothing().returning(*memories.c)
        async with self._write() as conn:
            inserted = (await conn.execute(stmt)).mappings().first()
            if inserted is not None:
                stored = _row_to_record(inserted)
            else:
                found = await _select_by_id_or_key(conn, record.tenant_id, record.id, idempotency_key)
                if found is None:
                    raise ValueError(f"memory id {record.id} is taken in another tenant")
                stored = found
            await self._append_audit(conn, audit(stored))
            await conn.execute(Q.DELETE_CANDIDATE, {"ref": drop_candidate})
        return stored

    async def record_decision(self, event: AuditEventIn, *, drop_candidate: str) -> None:
        """A decision that stores nothing (REJECT, NOOP): its audit event and the claim check dropped, at once,
        so the parked content never outlives the decision and the decision is never lost with it."""
        async with self._write() as conn:
            await self._append_audit(conn, event)
            await conn.execute(Q.DELETE_CANDIDATE, {"ref": drop_candidate})

    async def screen_inputs(
        self, tenant_id: str, owner_id: str, ref: str, source: tuple[str, str] | None
    ) -> tuple[bool, str | None, bool]:
        """What screening reads before anything else, in one statement: (memory on for the owner, the parked
        content or None, whether the cited source record `(system, key)` is quarantined)."""
        params: dict[str, Any] = {"tenant_id": tenant_id, "owner_id": owner_id, "ref": ref, "now": _utcnow()}
        stmt = Q.SCREEN_INPUTS
        if source is not None:
            stmt = Q.SCREEN_INPUTS_WITH_SOURCE
            params |= {"system": source[0], "key": source[1]}
        async with self._read(single_statement=True) as conn:
            enabled, content, is_quarantined = (await conn.execute(stmt, params)).one()
        return (True if enabled is None else bool(enabled)), content, bool(is_quarantined)

    async def get_audit_event(self, event_id: str) -> AuditEvent | None:
        """One event by its id (a retried activity reads back the decision it recorded)."""
        async with self._read() as conn:
            row = (await conn.execute(sa.select(audit_events).where(audit_events.c.id == event_id))).mappings().first()
        return AuditEvent.model_validate(dict(row)) if row is not None else None

    async def get_memory(self, tenant_id: str, memory_id: str) -> MemoryRecord | None:
        """One memory of this tenant; another tenant's id is simply absent."""
        async with self._read(single_statement=True) as conn:
            return await _select_memory(conn, tenant_id, memory_id)

    async def get_many(self, tenant_id: str, ids: Sequence[str]) -> dict[str, MemoryRecord]:
        """Memories of this tenant by id; missing ids are left out of the mapping.

        By primary key: the tenant test is `tenant_id || '' = ?` (see `_bound_filter_clause`), or
        SQLite walks the whole tenant through its tenant-led index.
        """
        async with self._read(single_statement=True) as conn:
            return await _records_by_ids(conn, Q.MEMORIES_BY_IDS, {"tenant_id": tenant_id}, ids)

    async def find_by_idempotency_key(self, tenant_id: str, key: str) -> MemoryRecord | None:
        """The memory an earlier request with this key created, so a retried request answers the same."""
        async with self._read() as conn:
            return await _select_by_key(conn, tenant_id, key)

    async def eligible(self, read_filter: ReadFilter, ids: Sequence[str], now: datetime) -> list[MemoryRecord]:
        """The subset of `ids` this filter admits *now*, in the order of `ids`.

        The durable store never lags a tombstone, so index hits are re-checked here before any
        content is loaded.
        """
        if not ids or not read_filter.clauses:
            return []
        async with self._read() as conn:
            return await _eligible_records(conn, read_filter, ids, now)

    async def answer_search(
        self,
        read_filter: ReadFilter,
        ids: Sequence[str],
        now: datetime,
        audit: Callable[[list[MemoryRecord]], AuditEventIn],
        *,
        drop_candidate: str | None = None,
        settings_owner: str | None = None,
    ) -> list[MemoryRecord] | None:
        """`eligible`, its read event and the query's claim check dropped, in one write transaction.

        Why one: the search route used to pay four transactions (settings, load, audit, drop) on
        every answer. Now the content is read, the event naming exactly what was read is chained,
        and the parked query is dropped together, so an answer never exists without its audit row
        (if the append fails, nothing is returned) and the audit never lists what was not read.
        `audit` builds the event from the records found (ids only, never content).

        `settings_owner`: the person served; when they have switched memory off, nothing is read
        or audited and None is returned (the query is still dropped). Checked here, in the same
        transaction as the read, a switch-off that committed before it is always honoured.
        """
        async with self._write() as conn:
            if settings_owner is not None:
                params = {"tenant_id": read_filter.tenant_id, "owner_id": settings_owner}
                enabled = await conn.scalar(Q.MEMORY_ENABLED, params)
                if enabled is not None and not enabled:
                    if drop_candidate is not None:
                        await conn.execute(Q.DELETE_CANDIDATE, {"ref": drop_candidate})
                    return None
            records = await _eligible_records(conn, read_filter, ids, now)
            await self._append_audit(conn, audit(records))
            if drop_candidate is not None:
                await conn.execute(Q.DELETE_CANDIDATE, {"ref": drop_candidate})
        return records

    async def eligible_meta(
        self, read_filter: ReadFilter, ids: Sequence[str], now: datetime
    ) -> dict[str, EligibleMeta]:
        """`eligible`, for ranking: the same re-check, returning only what ranking needs, never content.

        Retrieve re-checks up to a hundred index candidates per query; loading their content (and
        building full records) would cost time and bring memory text into the search path for nothing.
        """
        if not ids or not read_filter.clauses:
            return {}
        stmt, params = by_ids_statement("meta", _META_COLUMNS, read_filter, now)
        found: dict[str, EligibleMeta] = {}
        async with self._read(single_statement=True) as conn:
            for chunk in _chunks(list(dict.fromkeys(ids)), _CHUNK):
                rows = await conn.execute(stmt, {**params, "ids": chunk})
                # Unpacked by position, in `_META_COLUMNS`' order: a named lookup on each of a dozen
                # columns of ~115 rows cost ~1.4 ms of the search's critical path on this box.
                for (
                    memory_id,
                    status,
                    created_at,
                    importance,
                    last_confirmed_at,
                    memory_type,
                    source_system,
                    source_key,
                    source_version,
                    version,
                    owner_id,
                    session,
                    turn,
                    speaker,
                ) in rows:
                    found[memory_id] = EligibleMeta(
                        status=_STATUSES[status],
                        created_at=created_at,
                        importance=importance,
                        last_confirmed_at=last_confirmed_at,
                        type=_TYPES[memory_type],
                        source_system=source_system,
                        source_key=source_key,
                        source_version=source_version,
                        version=version,
                        owner_id=owner_id,
                        session=session,
                        turn=turn,
                        speaker=speaker,
                    )
        return found

    async def list_memories(
        self, read_filter: ReadFilter, *, limit: int, cursor: str | None, now: datetime | None = None
    ) -> tuple[list[MemoryRecord], str | None]:
        """Newest first, keyset-paginated; the cursor is opaque and `ValueError("cursor")` when bad.

        Statuses come from `read_filter.statuses`; past-expiry rows are left out only when `now`
        is given (a person's own listing may want to show what has lapsed).
        """
        if limit < 1:
            raise ValueError("limit")
        after = _decode_memory_cursor(cursor) if cursor is not None else None
        if not read_filter.clauses:
            return [], None
        m = memories.c
        where, params = read_filter_clause(read_filter, now=now)
        stmt = sa.select(memories).where(where)
        if after is not None:
            created_at, memory_id = after
            stmt = stmt.where(sa.or_(m.created_at < created_at, sa.and_(m.created_at == created_at, m.id < memory_id)))
        stmt = stmt.order_by(m.created_at.desc(), m.id.desc()).limit(limit + 1)
        async with self._read() as conn:
            rows = (await conn.execute(stmt, params)).mappings().all()
        page = [_row_to_record(row) for row in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            next_cursor = _encode_cursor({"c": _iso(page[-1].created_at), "i": page[-1].id})
        return page, next_cursor

    async def changed_since(self, since: datetime, *, batch: int = 500) -> AsyncIterator[list[MemoryRecord]]:
        """Every tenant's memories changed at or after `since`, oldest first, in batches.

        What a derivative that lost its last unflushed writes (the Edge index after a crash) catches up on.
        """
        m = memories.c
        after: tuple[datetime, str] | None = None
        while True:
            stmt = sa.select(memories).where(m.updated_at >= since)
            if after is not None:
                stmt = stmt.where(sa.or_(m.updated_at > after[0], sa.and_(m.updated_at == after[0], m.id > after[1])))
            stmt = stmt.order_by(m.updated_at, m.id).limit(batch)
            async with self._read() as conn:
                rows = (await conn.execute(stmt)).mappings().all()
            if not rows:
                return
            records = [_row_to_record(row) for row in rows]
            yield records
            after = (records[-1].updated_at, records[-1].id)

    async def set_status(
        self,
        tenant_id: str,
        memory_id: str,
        status: Status,
        *,
        expected_version: int | None = None,
        now: datetime,
    ) -> MemoryRecord | None:
        """Move a memory along the status machine; None when it does not exist in this tenant.

        Already in `status`: returned unchanged (so retried activities are harmless). Otherwise
        the transition is checked (`InvalidTransition`), `version` is bumped and `updated_at` set;
        entering tombstoned/purged also stamps `tombstoned_at`/`purged_at`. A stale
        `expected_version`, or a concurrent change, raises `ConcurrencyConflict`.
        """
        target = Status(status)
        m = memories.c
        async with self._write() as conn:
            current = await _select_memory(conn, tenant_id, memory_id)
            if current is None:
                return None
            if current.status is target:
                return current
            if expected_version is not None and current.version != expected_version:
                raise ConcurrencyConflict(memory_id, expected_version, current.version)
            check_transition(current.status, target)
            changes: dict[str, Any] = {"status": target, "version": current.version + 1, "updated_at": now}
            changes["live_slot"] = live_slot_key(current) if target in _LIVE else None
            if target is Status.TOMBSTONED:
                changes["tombstoned_at"] = now
            elif target is Status.PURGED:
                changes["purged_at"] = now
            result = await conn.execute(
                sa.update(memories)
                .where(m.tenant_id == tenant_id, m.id == memory_id, m.version == current.version)
                .values({k: _column_value(v) for k, v in changes.items()})
            )
            if result.rowcount != 1:
                raise ConcurrencyConflict(memory_id, current.version, None)
            updated = await _select_memory(conn, tenant_id, memory_id)
        assert updated is not None
        return updated

    async def adopt_slot(self, tenant_id: str, memory_id: str, slot: str, *, now: datetime) -> MemoryRecord | None:
        """Give a live, slotless memory a slot of its own, so a correction can supersede it through the gate.

        Why: supersession is by slot (one live value per slot is a database invariant). An owner's edit of
        a memory that names no slot needs a chain to join; the memory adopts `slot` (the API uses
        `edit.<its id>`), and the corrected version is proposed into that slot. Idempotent: a memory that
        already has a slot, or is no longer live, is returned unchanged; None when absent.
        """
        m = memories.c
        async with self._write() as conn:
            current = await _select_memory(conn, tenant_id, memory_id)
            if current is None or current.slot is not None or current.status not in _LIVE:
                return current
            adopted = current.model_copy(update={"slot": slot})
            result = await conn.execute(
                sa.update(memories)
                .where(m.tenant_id == tenant_id, m.id == memory_id, m.version == current.version)
                .values(slot=slot, live_slot=live_slot_key(adopted), version=current.version + 1, updated_at=now)
            )
            if result.rowcount != 1:
                raise ConcurrencyConflict(memory_id, current.version, None)
            return await _select_memory(conn, tenant_id, memory_id)

    async def set_retention_class(
        self, tenant_id: str, memory_id: str, retention_class: str, *, now: datetime, actor: str, reason: str
    ) -> tuple[str, MemoryRecord] | None:
        """Assign a memory's retention class (a legal hold, an age limit) and record it in the audit chain.

        Why one transaction: the class decides whether the expiry sweep may take the memory, so the
        change and its audit event land together or not at all. Returns the previous class and the
        updated record; None when the memory is absent. A row whose content is gone (expired,
        tombstoned, purged) is returned unchanged, for the caller to refuse.
        """
        m = memories.c
        async with self._write() as conn:
            current = await _select_memory(conn, tenant_id, memory_id)
            if current is None:
                return None
            if current.status in CONTENT_GONE_STATUSES or current.retention_class == retention_class:
                return current.retention_class, current
            result = await conn.execute(
                sa.update(memories)
                .where(m.tenant_id == tenant_id, m.id == memory_id, m.version == current.version)
                .values(retention_class=retention_class, version=current.version + 1, updated_at=now)
            )
            if result.rowcount != 1:
                raise ConcurrencyConflict(memory_id, current.version, None)
            await self._append_audit(
                conn,
                AuditEventIn(
                    at=now,
                    tenant_id=tenant_id,
                    actor=actor,
                    operation=Operation.UPDATE,
                    memory_id=memory_id,
                    namespace=namespace_label(current.scope, current.owner_id, current.agent_id, current.store),
                    reason=reason,
                    details={"retention_class_from": current.retention_class, "retention_class_to": retention_class},
                    hash_before=current.content_hash,
                    hash_after=current.content_hash,
                ),
            )
            updated = await _select_memory(conn, tenant_id, memory_id)
            assert updated is not None
            return current.retention_class, updated

    async def touch_last_used(self, tenant_id: str, ids: Sequence[str], at: datetime) -> None:
        """Record that these memories were just returned (recency ranking and retention use it)."""
        if not ids:
            return
        m = memories.c
        async with self._write() as conn:
            await conn.execute(
                sa.update(memories)
                .where(
                    m.tenant_id.concat("") == tenant_id, m.id.in_(list(ids))
                )  # by primary key: see _bound_filter_clause
                .values(last_used_at=at)
            )

    # -- owner settings --------------------------------------------------------------------

    async def get_settings(self, tenant_id: str, owner_id: str) -> bool:
        """Whether memory is on for this person; on unless they switched it off."""
        async with self._read(single_statement=True) as conn:
            value = await conn.scalar(Q.MEMORY_ENABLED, {"tenant_id": tenant_id, "owner_id": owner_id})
        return True if value is None else bool(value)

    async def put_settings(self, tenant_id: str, owner_id: str, memory_enabled: bool, now: datetime) -> None:
        """Switch memory on or off for a person (off stops writes and reads; it deletes nothing)."""
        stmt = self._insert(owner_settings).values(
            tenant_id=tenant_id, owner_id=owner_id, memory_enabled=memory_enabled, updated_at=now
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[owner_settings.c.tenant_id, owner_settings.c.owner_id],
            set_={"memory_enabled": stmt.excluded.memory_enabled, "updated_at": stmt.excluded.updated_at},
        )
        async with self._write() as conn:
            await conn.execute(stmt)

    # -- audit -----------------------------------------------------------------------------

    async def append_audit(self, event: AuditEventIn) -> str:
        """Append one event to the global hash chain; returns its id.

        Appends are serialized (SQLite write lock, PostgreSQL advisory transaction lock), so the
        previous hash read here is still the last one when this row lands: the chain never forks.
        An id already in the chain is not appended again (retried activities). With a signer, the
        head is checkpointed in the same transaction once `checkpoint_every` events have passed
        since the last checkpoint.
        """
        async with self._write() as conn:
            await self._append_audit(conn, event)
        return event.id

    async def _append_audit(self, conn: AsyncConnection, event: AuditEventIn) -> None:
        """`append_audit` inside a transaction the caller holds (so a change and its event land together)."""
        if self._pseudonyms is not None:
            event = self._pseudonyms.event(event)
        await self._lock_audit(conn)
        # One statement: is this id already in the chain, the head's hash, the last checkpoint.
        seen, prev, last = (await conn.execute(Q.AUDIT_CHAIN_STATE, {"id": event.id})).one()
        if seen is not None:
            return
        prev_hash = prev or GENESIS_HASH
        head_hash = chain_hash(prev_hash, event)
        row = {f: getattr(event, f) for f in _AUDIT_FIELDS} | {"prev_hash": prev_hash, "hash": head_hash}
        seq = await conn.scalar(Q.INSERT_AUDIT_EVENT, row)
        if self._signer is not None and int(seq) - int(last or 0) >= self._checkpoint_every:
            await self._write_checkpoint(conn, int(seq), head_hash, int(last or 0))

    async def append_audit_many(self, events: Sequence[AuditEventIn]) -> int:
        """`append_audit` for many events in one transaction (a deletion's per-memory events)."""
        async with self._write() as conn:
            return await self._append_audit_many(conn, events)

    async def _append_audit_many(self, conn: AsyncConnection, events: Sequence[AuditEventIn]) -> int:
        """Chain many events in their order with batched inserts; ids already present are skipped.

        One round trip per `_AUDIT_BATCH` events instead of three per event, so a 10k-memory erasure
        records its 10k events in well under a second. Checkpoints land exactly where one-by-one
        appends would have put them. Returns how many events were new.
        """
        if self._pseudonyms is not None:
            events = [self._pseudonyms.event(e) for e in events]
        a = audit_events.c
        await self._lock_audit(conn)
        present: set[str] = set()
        ids = [e.id for e in events]
        for start in range(0, len(ids), _AUDIT_BATCH):
            chunk = ids[start : start + _AUDIT_BATCH]
            present.update((await conn.execute(sa.select(a.id).where(a.id.in_(chunk)))).scalars())
        fresh: list[AuditEventIn] = []
        for e in events:
            if e.id not in present:
                present.add(e.id)
                fresh.append(e)
        if not fresh:
            return 0
        prev_hash = await conn.scalar(sa.select(a.hash).order_by(a.seq.desc()).limit(1)) or GENESIS_HASH
        rows: list[dict[str, Any]] = []
        for e in fresh:
            head_hash = chain_hash(prev_hash, e)
            rows.append({**{f: getattr(e, f) for f in _AUDIT_FIELDS}, "prev_hash": prev_hash, "hash": head_hash})
            prev_hash = head_hash
        last = int(await conn.scalar(sa.select(sa.func.max(audit_checkpoints.c.seq))) or 0)
        for start in range(0, len(rows), _AUDIT_BATCH):
            batch = rows[start : start + _AUDIT_BATCH]
            returned = await conn.execute(
                sa.insert(audit_events).returning(a.seq, a.hash, sort_by_parameter_order=True), batch
            )
            placed = [(int(r.seq), str(r.hash)) for r in returned]
            # The chain is in seq order: the batch must have been numbered in the order it was hashed.
            if [h for _, h in placed] != [r["hash"] for r in batch] or any(
                x[0] >= y[0] for x, y in itertools.pairwise(placed)
            ):
                raise RuntimeError("audit batch was not numbered in insertion order")
            if self._signer is not None:
                for seq, head_hash in placed:
                    if seq - last >= self._checkpoint_every:
                        await self._write_checkpoint(conn, seq, head_hash, last)
                        last = seq
        return len(fresh)

    async def _lock_audit(self, conn: AsyncConnection) -> None:
        """Serialize chain appends: PostgreSQL's advisory lock (SQLite already holds its write lock)."""
        if self.dialect == "postgresql":
            await conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _AUDIT_LOCK_KEY})

    async def _write_checkpoint(self, conn: AsyncConnection, seq: int, head_hash: str, prev_seq: int) -> Checkpoint:
        assert self._signer is not None
        # Counted incrementally (the previous checkpoint's count plus the events since), so a
        # checkpoint costs O(interval), not O(chain), while the chain lock is held.
        a, c = audit_events.c, audit_checkpoints.c
        before = 0
        if prev_seq:
            before = int(await conn.scalar(sa.select(c.event_count).where(c.seq == prev_seq)) or 0)
        since = await conn.scalar(
            sa.select(sa.func.count()).select_from(audit_events).where(a.seq > prev_seq, a.seq <= seq)
        )
        count = before + int(since or 0)
        checkpoint = self._signer.sign(seq=seq, head_hash=head_hash, event_count=count, prev_seq=prev_seq, at=_utcnow())
        await conn.execute(sa.insert(audit_checkpoints).values(**checkpoint.model_dump()))
        # Logged (hashes only) so the newest signed head also lives outside the database: shipping
        # these lines elsewhere anchors the tail that a database writer could otherwise truncate.
        _log.info(
            "audit checkpoint seq=%d head=%s count=%d key=%s sig=%s",
            seq,
            head_hash,
            count,
            checkpoint.key_id,
            checkpoint.signature,
        )
        return checkpoint

    async def checkpoint_audit(self) -> Checkpoint | None:
        """Sign the current head now (None without a signer, or when the head is already signed)."""
        if self._signer is None:
            return None
        a, c = audit_events.c, audit_checkpoints.c
        async with self._write() as conn:
            await self._lock_audit(conn)
            head = (await conn.execute(sa.select(a.seq, a.hash).order_by(a.seq.desc()).limit(1))).first()
            last = int(await conn.scalar(sa.select(sa.func.max(c.seq))) or 0)
            if head is None or int(head.seq) == last:
                return None
            return await self._write_checkpoint(conn, int(head.seq), head.hash, last)

    async def list_checkpoints(self, *, limit: int = 100) -> list[Checkpoint]:
        """The newest checkpoints first (for operators and tests)."""
        c = audit_checkpoints.c
        async with self._read() as conn:
            rows = (await conn.execute(sa.select(audit_checkpoints).order_by(c.seq.desc()).limit(limit))).mappings()
            return [Checkpoint.model_validate(dict(row)) for row in rows]

    async def list_audit(
        self,
        tenant_id: str,
        *,
        memory_id: str | None = None,
        deletion_id: str | None = None,
        actor: str | None = None,
        operation: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        oldest_first: bool = False,
        limit: int,
        cursor: str | None,
    ) -> tuple[list[AuditEvent], str | None]:
        """A tenant's events, newest first (or oldest first), filtered; opaque keyset cursor.

        `since` is inclusive and `until` exclusive (`at` is the time the event was recorded). `actor`
        is given in the clear (`user:alice`) and matched in its stored, pseudonymous form too. A
        cursor is only valid with the ordering that produced it.
        """
        if limit < 1:
            raise ValueError("limit")
        after = _decode_audit_cursor(cursor, oldest_first) if cursor is not None else None
        a = audit_events.c
        stmt = sa.select(audit_events).where(a.tenant_id == tenant_id)
        for column, value in ((a.memory_id, memory_id), (a.deletion_id, deletion_id)):
            if value is not None:
                stmt = stmt.where(column == value)
        if actor is not None:
            # Events are stored with the actor pseudonymous; rows written before that hold it raw.
            forms = {actor, self._pseudonyms.actor(tenant_id, actor)} if self._pseudonyms else {actor}
            stmt = stmt.where(a.actor.in_(sorted(forms)))
        if operation is not None:
            stmt = stmt.where(a.operation == operation)
        if since is not None:
            stmt = stmt.where(a.at >= since)
        if until is not None:
            stmt = stmt.where(a.at < until)
        if after is not None:
            stmt = stmt.where(a.seq > after if oldest_first else a.seq < after)
        stmt = stmt.order_by(a.seq.asc() if oldest_first else a.seq.desc()).limit(limit + 1)
        async with self._read() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        page = [AuditEvent.model_validate(dict(row)) for row in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            next_cursor = _encode_cursor({"s": page[-1].seq, "o": "a"} if oldest_first else {"s": page[-1].seq})
        return page, next_cursor

    async def audit_tenants_of(self, memory_id: str) -> list[str]:
        """Which tenants have events for this memory id (the CLI's `audit show` without --tenant)."""
        a = audit_events.c
        async with self._read() as conn:
            rows = await conn.execute(sa.select(a.tenant_id).where(a.memory_id == memory_id).distinct())
            return sorted(r[0] for r in rows)

    async def verify_audit(self) -> tuple[bool, int | None]:
        """Recompute the whole chain: (True, None), or (False, seq of the first event that fails).

        Links only; `verify_audit_chain` also checks the signed checkpoints.
        """
        result = await self.verify_audit_chain(None)
        return result.ok, result.broken_seq

    async def verify_audit_chain(
        self, verifier: CheckpointVerifier | None, *, require_every: int | None = None
    ) -> AuditVerification:
        """Walk every event and every checkpoint in order; name the first broken link.

        Links: each event's `prev_hash` is the previous event's `hash`, and its `hash` is
        recomputed from its canonical form. Checkpoints (when `verifier` is given): each one ends
        at an existing event whose hash it names, counts the events up to it, points at the
        checkpoint before it, and carries a valid signature from a known key. `require_every`
        also fails a chain whose newest events went longer than that without a checkpoint (a
        deleted checkpoint, or a writer that bypassed the signer).
        """
        a = audit_events.c
        checkpoints: list[Checkpoint] = []
        if verifier is not None:
            async with self._read() as conn:
                rows = (await conn.execute(sa.select(audit_checkpoints).order_by(audit_checkpoints.c.seq))).mappings()
                checkpoints = [Checkpoint.model_validate(dict(row)) for row in rows]
        pending = iter(checkpoints)
        next_cp = next(pending, None)
        prev_cp_seq = 0
        checked_cps = 0
        prev_hash = GENESIS_HASH
        last_seq = 0
        count = 0

        def broken(seq: int, reason: str) -> AuditVerification:
            return AuditVerification(
                ok=False,
                events=count,
                checkpoints=checked_cps,
                broken_seq=seq,
                reason=reason,
                last_good_checkpoint=prev_cp_seq or None,
            )

        async with self._read() as conn:
            while True:
                rows = (
                    await conn.execute(
                        sa.select(audit_events).where(a.seq > last_seq).order_by(a.seq).limit(_VERIFY_BATCH)
                    )
                ).mappings()
                batch = 0
                for row in rows:
                    batch += 1
                    seq = int(row["seq"])
                    if next_cp is not None and next_cp.seq < seq:
                        return broken(next_cp.seq, "checkpoint_event_missing")
                    stored = AuditEventIn.model_construct(**{f: row[f] for f in _AUDIT_FIELDS})
                    if row["prev_hash"] != prev_hash:
                        return broken(seq, "prev_hash_mismatch")
                    if row["hash"] != chain_hash(prev_hash, stored):
                        return broken(seq, "hash_mismatch")
                    count += 1
                    prev_hash = row["hash"]
                    last_seq = seq
                    if next_cp is not None and next_cp.seq == seq:
                        reason = _checkpoint_problem(next_cp, row["hash"], count, prev_cp_seq, verifier)
                        if reason is not None:
                            return broken(seq, reason)
                        checked_cps += 1
                        prev_cp_seq = seq
                        next_cp = next(pending, None)
                if batch < _VERIFY_BATCH:
                    break
        if next_cp is not None:
            return broken(next_cp.seq, "events_missing_after_checkpoint")
        if require_every is not None and verifier is not None and last_seq - prev_cp_seq > require_every:
            return broken(last_seq, "checkpoint_missing")
        return AuditVerification(
            ok=True,
            events=count,
            checkpoints=checked_cps,
            head_seq=last_seq or None,
            head_hash=prev_hash if count else None,
            last_good_checkpoint=prev_cp_seq or None,
        )


def _checkpoint_problem(
    checkpoint: Checkpoint, head_hash: str, count: int, prev_seq: int, verifier: CheckpointVerifier | None
) -> str | None:
    if checkpoint.head_hash != head_hash:
        return "checkpoint_hash_mismatch"
    if checkpoint.event_count != count:
        return "checkpoint_count_mismatch"
    if checkpoint.prev_seq != prev_seq:
        return "checkpoint_sequence_broken"
    return verifier.check(checkpoint) if verifier is not None else None


async def open_store(settings: Settings) -> SqlStore:
    """The store as the API, the worker and the CLI open it: the settings' audit signer, and person ids
    in audit events hashed under the subject key (the receipts' scheme)."""
    return await SqlStore.open(
        settings.database_url or "",
        audit_signer=settings.audit_signer,
        checkpoint_every=settings.audit_checkpoint_every,
        audit_pseudonyms=Pseudonymizer(subject_key(settings.auth_secret_value)),
    )


# -- the ReadFilter in SQL -------------------------------------------------------------------


def read_filter_clause(
    read_filter: ReadFilter, *, now: datetime | None = None
) -> tuple[ColumnElement[bool], dict[str, Any]]:
    """The WHERE clause for what `read_filter` admits and the parameters to execute it with; mirrors
    `ReadFilter.admits` exactly.

    tenant AND (any namespace clause) AND status AND sensitivity AND types AND (when `now` is
    given) not expired. No clauses admit nothing. The same clause `by_ids_statement` binds.
    """
    if not read_filter.clauses:
        return sa.false(), {}
    clause = _bound_filter_clause(_filter_shape(read_filter), by_ids=False, with_now=now is not None)
    return clause, _filter_params(read_filter, now)


_FilterShape = tuple[tuple[tuple[str, bool, bool, bool], ...], bool]
_BY_IDS: dict[tuple[str, _FilterShape], sa.Select[Any]] = {}
"""`by_ids_statement`'s statements, built once per filter shape with bound parameters: building the
clause anew for every query cost more than the read itself on Retrieve's hot path."""


def _filter_shape(read_filter: ReadFilter) -> _FilterShape:
    """What decides the statement's text: each clause's scope and which of its lists it has, and types."""
    clauses = tuple(
        (c.scope.value, c.owner_ids is not None, c.agent_id is not None, c.stores is not None)
        for c in read_filter.clauses
    )
    return clauses, read_filter.types is not None


def _bound_filter_clause(shape: _FilterShape, *, by_ids: bool, with_now: bool) -> ColumnElement[bool]:
    """What a read filter of this shape admits, with parameters in place of values (see `_filter_params`).

    `by_ids`: the statement also lists the ids (`id IN (...)`), so the primary key is the way in. The
    tenant test is then written as `tenant_id || '' = ?` (same truth, no index can serve it), because
    SQLite's planner, without statistics, otherwise walks a whole tenant through a tenant-led index:
    25 ms at 100k memories instead of well under one.
    """
    m = memories.c
    namespaces: list[ColumnElement[bool]] = []
    for i, (scope, owners, agent, stores) in enumerate(shape[0]):
        parts: list[ColumnElement[bool]] = [m.scope == scope]
        if owners:
            parts.append(m.owner_id.in_(sa.bindparam(f"owners_{i}", expanding=True)))
        if agent:
            parts.append(m.agent_id == sa.bindparam(f"agent_{i}"))
        if stores:
            parts.append(m.store.in_(sa.bindparam(f"stores_{i}", expanding=True)))
        namespaces.append(sa.and_(*parts))
    conditions: list[ColumnElement[bool]] = [
        (m.tenant_id.concat("") if by_ids else m.tenant_id) == sa.bindparam("tenant_id"),
        sa.or_(*namespaces),
        m.status.in_(sa.bindparam("statuses", expanding=True)),
        m.sensitivity_rank <= sa.bindparam("max_rank"),
    ]
    if shape[1]:
        conditions.append(m.type.in_(sa.bindparam("types", expanding=True)))
    if with_now:
        conditions.append(sa.or_(m.expires_at.is_(None), m.expires_at > sa.bindparam("now", type_=m.expires_at.type)))
    return sa.and_(*conditions)


def _filter_params(read_filter: ReadFilter, now: datetime | None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "tenant_id": read_filter.tenant_id,
        "statuses": [s.value for s in read_filter.statuses],
        "max_rank": sensitivity_rank(read_filter.max_sensitivity),
    }
    if now is not None:
        params["now"] = now
    for i, c in enumerate(read_filter.clauses):
        if c.owner_ids is not None:
            params[f"owners_{i}"] = list(c.owner_ids)
        if c.agent_id is not None:
            params[f"agent_{i}"] = c.agent_id
        if c.stores is not None:
            params[f"stores_{i}"] = list(c.stores)
    if read_filter.types is not None:
        params["types"] = [t.value for t in read_filter.types]
    return params


def by_ids_statement(
    kind: str, columns: Sequence[Any], read_filter: ReadFilter, now: datetime
) -> tuple[sa.Select[Any], dict[str, Any]]:
    """`SELECT columns WHERE <what read_filter admits at now> AND id IN :ids` (by primary key) and its
    parameters (bind `ids` per chunk); `kind` names the column set, so each set is built once per shape.
    A filter with no clauses admits nothing: callers return before asking."""
    if not read_filter.clauses:
        raise ValueError("a read filter without clauses admits nothing")
    key = (kind, _filter_shape(read_filter))
    stmt = _BY_IDS.get(key)
    if stmt is None:
        where = _bound_filter_clause(key[1], by_ids=True, with_now=True)
        stmt = sa.select(*columns).where(where, memories.c.id.in_(sa.bindparam("ids", expanding=True)))
        _BY_IDS[key] = stmt
    return stmt, _filter_params(read_filter, now)


# -- helpers ---------------------------------------------------------------------------------


_ALEMBIC_LOCK = threading.Lock()


@asynccontextmanager
async def _alembic_guard() -> AsyncIterator[None]:
    """Process-wide mutual exclusion for Alembic, usable from any event loop or thread.

    Polls a non-blocking acquire so a cancelled waiter never ends up holding the lock.
    """
    # not an asyncio.Event: those belong to one loop, and this must hold across loops and threads
    while not _ALEMBIC_LOCK.acquire(blocking=False):  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    try:
        yield
    finally:
        _ALEMBIC_LOCK.release()


def _upgrade_head(connection: Connection) -> None:
    """Alembic upgrade on a connection that is already inside the locked migration transaction."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


def _ensure_parent_dir(database: str) -> None:
    Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    """Per-connection SQLite settings; transactions are begun by us (see `_sqlite_on_begin`)."""
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA busy_timeout=5000")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA secure_delete=ON")
    finally:
        cursor.close()


def _sqlite_on_connect_ephemeral(dbapi_connection: Any, record: Any) -> None:
    """`_sqlite_on_connect`, then commits that do not wait for the disk (see `SqlStore._write`)."""
    _sqlite_on_connect(dbapi_connection, record)
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def _sqlite_on_begin(conn: Connection) -> None:
    """Writes take the database lock up front, so read-then-write never races another process; a
    single-statement read opens no transaction at all (`_AUTOCOMMIT_READ`)."""
    options = conn.get_execution_options()
    if options.get(_AUTOCOMMIT_READ):
        return
    conn.exec_driver_sql("BEGIN IMMEDIATE" if options.get(_IMMEDIATE) else "BEGIN")


async def _mark_superseded(conn: AsyncConnection, holder: MemoryRecord, *, by: str, at: datetime) -> bool:
    """`holder` superseded by memory `by`, if it is still at the version read (False: it moved on meanwhile)."""
    m = memories.c
    done = await conn.execute(
        sa.update(memories)
        .where(m.id == holder.id, m.version == holder.version)
        .values(
            status=Status.SUPERSEDED.value, superseded_by=by, live_slot=None, version=holder.version + 1, updated_at=at
        )
    )
    return bool(done.rowcount == 1)


async def _select_memory(conn: AsyncConnection, tenant_id: str, memory_id: str) -> MemoryRecord | None:
    row = (await conn.execute(Q.MEMORY_BY_ID, {"tenant_id": tenant_id, "id": memory_id})).mappings().first()
    return _row_to_record(row) if row is not None else None


async def _select_by_id_or_key(
    conn: AsyncConnection, tenant_id: str, memory_id: str, key: str | None
) -> MemoryRecord | None:
    """The row with this id, else the one with this idempotency key: one statement for both lookups."""
    if key is None:
        rows = (await conn.execute(Q.MEMORY_BY_ID, {"tenant_id": tenant_id, "id": memory_id})).mappings().all()
    else:
        params = {"tenant_id": tenant_id, "id": memory_id, "key": key}
        rows = (await conn.execute(Q.MEMORY_BY_ID_OR_KEY, params)).mappings().all()
    by_id = [r for r in rows if r["id"] == memory_id]
    chosen = by_id[0] if by_id else (rows[0] if rows else None)
    return _row_to_record(chosen) if chosen is not None else None


async def _select_by_key(conn: AsyncConnection, tenant_id: str, key: str) -> MemoryRecord | None:
    m = memories.c
    row = (
        (await conn.execute(sa.select(memories).where(m.tenant_id == tenant_id, m.idempotency_key == key)))
        .mappings()
        .first()
    )
    return _row_to_record(row) if row is not None else None


def _column_value(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def _record_to_row(record: MemoryRecord) -> dict[str, Any]:
    row = {name: _column_value(value) for name, value in record.model_dump(mode="python").items()}
    row["sensitivity_rank"] = sensitivity_rank(record.sensitivity)
    row["live_slot"] = live_slot_key(record) if record.status in _LIVE else None
    return row


_LIVE = frozenset({Status.ACTIVE, Status.STALE})


def slot_key(scope: str, agent_id: str | None, store: str | None, slot: str) -> str:
    """The namespace-qualified slot a live value occupies (owner and tenant are columns of their own)."""
    return f"{scope}|{agent_id or ''}|{store or ''}|{slot}"


def live_slot_key(record: MemoryRecord) -> str | None:
    """`slot_key` of a record with a slot, None for slotless memories (they never conflict)."""
    if record.slot is None:
        return None
    return slot_key(record.scope.value, record.agent_id, record.store, record.slot)


def _row_to_record(row: RowMapping) -> MemoryRecord:
    return MemoryRecord.model_validate({name: row[name] for name in _RECORD_FIELDS})


async def _records_by_ids(
    conn: AsyncConnection, stmt: sa.Select[Any], params: dict[str, Any], ids: Sequence[str]
) -> dict[str, MemoryRecord]:
    """Rows of `stmt` (which binds its ids as `ids`) for each distinct id, in chunks of `_CHUNK`, by id."""
    found: dict[str, MemoryRecord] = {}
    for chunk in _chunks(list(dict.fromkeys(ids)), _CHUNK):
        for row in (await conn.execute(stmt, {**params, "ids": chunk})).mappings():
            found[row["id"]] = _row_to_record(row)
    return found


async def _eligible_records(
    conn: AsyncConnection, read_filter: ReadFilter, ids: Sequence[str], now: datetime
) -> list[MemoryRecord]:
    """`SqlStore.eligible` inside a transaction the caller holds (none without ids or clauses)."""
    if not ids or not read_filter.clauses:
        return []
    stmt, params = by_ids_statement("records", (memories,), read_filter, now)
    found = await _records_by_ids(conn, stmt, params, ids)
    return [found[i] for i in dict.fromkeys(ids) if i in found]


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _utcnow() -> datetime:
    return datetime.now(UTC)


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def _encode_cursor(payload: dict[str, Any]) -> str:
    raw = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode_cursor(cursor: str) -> dict[str, Any]:
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        payload = json.loads(raw.decode("utf-8"))
    except (binascii.Error, UnicodeError, ValueError):
        raise ValueError("cursor") from None
    if not isinstance(payload, dict):
        raise ValueError("cursor")
    return payload


def _decode_memory_cursor(cursor: str) -> tuple[datetime, str]:
    payload = _decode_cursor(cursor)
    created, memory_id = payload.get("c"), payload.get("i")
    if set(payload) != {"c", "i"} or not isinstance(created, str) or not isinstance(memory_id, str):
        raise ValueError("cursor")
    try:
        at = datetime.fromisoformat(created)
    except ValueError:
        raise ValueError("cursor") from None
    if at.tzinfo is None:
        raise ValueError("cursor")
    return at, memory_id


def _decode_audit_cursor(cursor: str, oldest_first: bool = False) -> int:
    payload = _decode_cursor(cursor)
    seq = payload.get("s")
    expected = {"s", "o"} if oldest_first else {"s"}
    if set(payload) != expected or (oldest_first and payload.get("o") != "a"):
        raise ValueError("cursor")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise ValueError("cursor")
    return seq
