"""Memory rows: inserts, the commit that makes a value live (superseding its slot's holder), status changes.

One live value per slot per namespace is a database invariant (a unique index on `live_slot`), so two
writers racing for one slot cannot both win: the loser gets `ConcurrencyConflict` and, retried,
supersedes the winner. Every change that the audit log must show appends its event in the same
transaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from memwarden.records import (
    CONTENT_GONE_STATUSES,
    LIVE_STATUSES,
    MemoryRecord,
    Status,
    check_transition,
    namespace_label,
)
from memwarden.stores.audit import AuditEventIn, Operation
from memwarden.stores.sql import statements as Q
from memwarden.stores.sql.audit_log import AuditLog
from memwarden.stores.sql.rows import (
    _CHUNK,
    _column_value,
    _record_to_row,
    _records_by_ids,
    _row_to_record,
    _select_by_id_or_key,
    _select_by_key,
    _select_memory,
    _touch_last_used,
    live_slot_key,
    slot_key,
)
from memwarden.stores.sql_models import memories


class ConcurrencyConflict(Exception):
    """The memory changed since the caller read it (optimistic concurrency on `version`)."""

    def __init__(self, memory_id: str, expected: int | None, actual: int | None) -> None:
        super().__init__(f"memory {memory_id}: expected version {expected}, found {actual}")
        self.memory_id = memory_id
        self.expected = expected
        self.actual = actual


class MemoryRows(AuditLog):
    """Reads and writes of `memories` by id, key and slot (reads through a `ReadFilter`: `FilteredReads`)."""

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
            existing = await conn.run_sync(_select_memory, record.tenant_id, record.id)
            if existing is None and idempotency_key is not None:
                existing = await conn.run_sync(_select_by_key, record.tenant_id, idempotency_key)
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
        row = await self._query(
            lambda conn: conn.execute(Q.SLOT_HOLDER, params).mappings().first(), single_statement=True
        )
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
        assert record.status in LIVE_STATUSES, "commit_live makes a record live"

        def commit(conn: Connection) -> tuple[MemoryRecord, str | None]:
            stored, superseded, fresh = self._commit_live_in(
                conn, record, idempotency_key=idempotency_key, derived_from=derived_from
            )
            if fresh and audit is not None:
                self._append_audit(conn, audit(stored), row=stored)
            if drop_candidate is not None:
                conn.execute(Q.DELETE_CANDIDATE, {"ref": drop_candidate})
            return stored, superseded

        try:
            stored, superseded = await self._transact(commit)
        except IntegrityError as exc:
            raise ConcurrencyConflict(record.id, None, None) from exc
        return stored, superseded

    def _commit_live_in(
        self,
        conn: Connection,
        record: MemoryRecord,
        *,
        idempotency_key: str | None,
        derived_from: list[str] | None = None,
    ) -> tuple[MemoryRecord, str | None, bool]:
        """`commit_live`'s effect inside a transaction the caller holds (a bulk import commits many in one).

        Returns (the live row, the id it superseded, whether this call made it live: False when the record
        was already committed and is returned as it is). An `IntegrityError` is the caller's to map.
        """
        m = memories.c
        existing = _select_by_id_or_key(conn, record.tenant_id, record.id, idempotency_key)
        if existing is not None and existing.status is not Status.PENDING:
            return existing, existing.supersedes, False
        superseded: str | None = None
        key = live_slot_key(record)
        if key is not None:
            query = Q.SLOT_HOLDER_FOR_UPDATE if self.dialect == "postgresql" else Q.SLOT_HOLDER
            params = {"tenant_id": record.tenant_id, "owner_id": record.owner_id, "live_slot": key}
            holder_row = conn.execute(query, params).mappings().first()
            if holder_row is not None and holder_row["id"] != record.id:
                holder = _row_to_record(holder_row)
                check_transition(holder.status, Status.SUPERSEDED)
                if not _mark_superseded(conn, holder, by=record.id, at=record.updated_at):
                    raise ConcurrencyConflict(holder.id, holder.version, None)
                superseded = holder.id
        live = record.model_copy(update={"supersedes": superseded})
        if existing is not None:  # a pending write, confirmed
            check_transition(existing.status, live.status)
            values = _record_to_row(live)
            values["version"] = existing.version + 1
            for column in ("id", "tenant_id", "created_at", "idempotency_key", "derived_from"):
                values.pop(column, None)
            conn.execute(sa.update(memories).where(m.id == existing.id, m.version == existing.version).values(**values))
            stored = _select_memory(conn, record.tenant_id, record.id)
        else:
            values = _record_to_row(live)
            values["idempotency_key"] = idempotency_key
            values["derived_from"] = list(derived_from) if derived_from is not None else None
            row = conn.execute(Q.INSERT_MEMORY, values).mappings()
            stored = _row_to_record(row.one())
        assert stored is not None
        return stored, superseded, True

    async def reject_pending(
        self,
        tenant_id: str,
        memory_id: str,
        now: datetime,
        *,
        audit: Callable[[MemoryRecord], AuditEventIn] | None = None,
    ) -> MemoryRecord | None:
        """A staged write declined or timed out: `rejected`, and its content dropped (never accepted).

        The audit event `audit(rejected row)` is appended in the same transaction, so a rejection is never
        stored without its event. Idempotent; None when absent. A row that is no longer pending is
        returned unchanged (its rejection, and the event with it, landed before).
        """
        m = memories.c

        def reject(conn: Connection) -> MemoryRecord | None:
            current = _select_memory(conn, tenant_id, memory_id)
            if current is None or current.status is not Status.PENDING:
                return current
            conn.execute(
                sa.update(memories)
                .where(m.id == memory_id, m.version == current.version)
                .values(status=Status.REJECTED.value, content=None, version=current.version + 1, updated_at=now)
            )
            rejected = _select_memory(conn, tenant_id, memory_id)
            assert rejected is not None
            if audit is not None:
                self._append_audit(conn, audit(rejected), row=rejected)
            return rejected

        return await self._transact(reject)

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

        def stage(conn: Connection) -> MemoryRecord:
            stored = self._stage_pending_in(conn, record, idempotency_key=idempotency_key)
            self._append_audit(conn, audit(stored), row=stored)
            conn.execute(Q.DELETE_CANDIDATE, {"ref": drop_candidate})
            return stored

        return await self._transact(stage)

    def _stage_pending_in(self, conn: Connection, record: MemoryRecord, *, idempotency_key: str | None) -> MemoryRecord:
        """`stage_pending`'s row inside a transaction the caller holds; a row already stored is kept as it is."""
        assert record.status is Status.PENDING
        values = _record_to_row(record)
        values["idempotency_key"] = idempotency_key
        values["derived_from"] = None
        stmt = self._insert(memories).values(**values).on_conflict_do_nothing().returning(*memories.c)
        inserted = conn.execute(stmt).mappings().first()
        if inserted is not None:
            return _row_to_record(inserted)
        found = _select_by_id_or_key(conn, record.tenant_id, record.id, idempotency_key)
        if found is None:
            raise ValueError(f"memory id {record.id} is taken in another tenant")
        return found

    async def record_decision(self, event: AuditEventIn, *, drop_candidate: str) -> None:
        """A decision that stores nothing (REJECT, NOOP): its audit event and the claim check dropped, at once,
        so the parked content never outlives the decision and the decision is never lost with it."""

        def record(conn: Connection) -> None:
            self._append_audit(conn, event)
            conn.execute(Q.DELETE_CANDIDATE, {"ref": drop_candidate})

        await self._transact(record)

    async def get_memory(self, tenant_id: str, memory_id: str) -> MemoryRecord | None:
        """One memory of this tenant; another tenant's id is simply absent."""
        return await self._query(lambda conn: _select_memory(conn, tenant_id, memory_id), single_statement=True)

    async def get_many(self, tenant_id: str, ids: Sequence[str]) -> dict[str, MemoryRecord]:
        """Memories of this tenant by id; missing ids are left out of the mapping.

        By primary key: the tenant test is `tenant_id || '' = ?` (see `_bound_filter_clause`), or
        SQLite walks the whole tenant through its tenant-led index.
        """
        params = {"tenant_id": tenant_id}
        return await self._query(
            lambda conn: _records_by_ids(conn, Q.MEMORIES_BY_IDS, params, ids), single_statement=True
        )

    async def find_by_idempotency_key(self, tenant_id: str, key: str) -> MemoryRecord | None:
        """The memory an earlier request with this key created, so a retried request answers the same."""
        return await self._query(lambda conn: _select_by_key(conn, tenant_id, key), single_statement=True)

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
            current = await conn.run_sync(_select_memory, tenant_id, memory_id)
            if current is None:
                return None
            if current.status is target:
                return current
            if expected_version is not None and current.version != expected_version:
                raise ConcurrencyConflict(memory_id, expected_version, current.version)
            check_transition(current.status, target)
            changes: dict[str, Any] = {"status": target, "version": current.version + 1, "updated_at": now}
            changes["live_slot"] = live_slot_key(current) if target in LIVE_STATUSES else None
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
            updated = await conn.run_sync(_select_memory, tenant_id, memory_id)
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
            current = await conn.run_sync(_select_memory, tenant_id, memory_id)
            if current is None or current.slot is not None or current.status not in LIVE_STATUSES:
                return current
            adopted = current.model_copy(update={"slot": slot})
            result = await conn.execute(
                sa.update(memories)
                .where(m.tenant_id == tenant_id, m.id == memory_id, m.version == current.version)
                .values(slot=slot, live_slot=live_slot_key(adopted), version=current.version + 1, updated_at=now)
            )
            if result.rowcount != 1:
                raise ConcurrencyConflict(memory_id, current.version, None)
            return await conn.run_sync(_select_memory, tenant_id, memory_id)

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
            current = await conn.run_sync(_select_memory, tenant_id, memory_id)
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
            await conn.run_sync(
                self._append_audit,
                AuditEventIn(
                    at=now,
                    tenant_id=tenant_id,
                    actor=actor,
                    operation=Operation.UPDATE,
                    memory_id=memory_id,
                    namespace=namespace_label(current),
                    reason=reason,
                    details={"retention_class_from": current.retention_class, "retention_class_to": retention_class},
                    hash_before=current.content_hash,
                    hash_after=current.content_hash,
                ),
            )
            updated = await conn.run_sync(_select_memory, tenant_id, memory_id)
            assert updated is not None
            return current.retention_class, updated

    async def touch_last_used(self, tenant_id: str, ids: Sequence[str], at: datetime) -> None:
        """Record that these memories were just returned (recency ranking and retention use it)."""
        if not ids:
            return
        await self._transact(lambda conn: _touch_last_used(conn, tenant_id, ids, at))


def _mark_superseded(conn: Connection, holder: MemoryRecord, *, by: str, at: datetime) -> bool:
    """`holder` superseded by memory `by`, if it is still at the version read (False: it moved on meanwhile)."""
    m = memories.c
    done = conn.execute(
        sa.update(memories)
        .where(m.id == holder.id, m.version == holder.version)
        .values(
            status=Status.SUPERSEDED.value, superseded_by=by, live_slot=None, version=holder.version + 1, updated_at=at
        )
    )
    return bool(done.rowcount == 1)
