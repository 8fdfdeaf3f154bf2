"""What revalidation changes in the durable store, each change with its audit event in one transaction.

Built on SqlStore like ForgetStore: unchanged -> `last_confirmed_at` (and a stale memory active
again); changed -> a new row supersedes the old in the same transaction (the slot's live value moves,
never two live values); gone -> `invalidated`; change events -> dependents `stale` or `invalidated`.
Each operation is idempotent, so a retried activity applies nothing twice: a confirmation of a row no
longer live is refused (None), a supersession whose new row exists returns it, an invalidated row stays.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from memwarden.records import LIVE_STATUSES, MemoryRecord, SourceChange, Status
from memwarden.stores.audit import AuditEventIn
from memwarden.stores.sql import (
    SqlStore,
    _mark_superseded,
    _record_to_row,
    _row_to_record,
    _select_memory,
    live_slot_key,
)
from memwarden.stores.sql_models import memories

_LIVE = tuple(sorted(s.value for s in LIVE_STATUSES))
"""`LIVE_STATUSES` as stored, for SQL."""
AuditFor = Callable[[MemoryRecord], AuditEventIn]


class RevalidationStore:
    def __init__(self, store: SqlStore) -> None:
        self.store = store

    def _by_source(self, tenant_id: str, system: str, key: str) -> sa.ColumnElement[bool]:
        m = memories.c
        return sa.and_(
            m.tenant_id == tenant_id,
            m.source_ref["system"].as_string() == system,
            m.source_ref["key"].as_string() == key,
        )

    async def dependents(self, tenant_id: str, system: str, key: str) -> list[MemoryRecord]:
        """Live memories (active or stale) that cite this source record."""
        m = memories.c
        stmt = sa.select(memories).where(self._by_source(tenant_id, system, key), m.status.in_(_LIVE))
        async with self.store.engine.connect() as conn:
            return [_row_to_record(r) for r in (await conn.execute(stmt)).mappings()]

    async def mark_for_event(
        self, tenant_id: str, system: str, key: str, change: SourceChange, now: datetime, audit: AuditFor
    ) -> list[str]:
        """A source announced a change: its dependents become `stale` (changed) or `invalidated` (deleted)
        before anyone can read them again. Returns the ids it moved; repeating the event moves none."""
        m = memories.c
        sources = (Status.ACTIVE.value,) if change is SourceChange.CHANGED else _LIVE
        target = Status.STALE if change is SourceChange.CHANGED else Status.INVALIDATED
        moved: list[str] = []
        async with self.store.transaction() as conn:
            rows = (
                await conn.execute(
                    sa.select(memories).where(self._by_source(tenant_id, system, key), m.status.in_(sources))
                )
            ).mappings()
            for record in [_row_to_record(r) for r in rows]:
                values: dict[str, Any] = {"status": target.value, "version": record.version + 1, "updated_at": now}
                if target is Status.INVALIDATED:
                    values["live_slot"] = None
                done = await conn.execute(
                    sa.update(memories).where(m.id == record.id, m.version == record.version).values(**values)
                )
                if done.rowcount == 1:
                    moved.append(record.id)
                    await conn.run_sync(self.store._append_audit, audit(record.model_copy(update={"status": target})))
        return moved

    async def stale_dependents(self, tenant_id: str, system: str, key: str) -> list[str]:
        """Ids of this record's dependents that are stale now: what a changed-event's pass revalidates."""
        m = memories.c
        stmt = sa.select(m.id).where(self._by_source(tenant_id, system, key), m.status == Status.STALE.value)
        async with self.store.engine.connect() as conn:
            return sorted((await conn.execute(stmt)).scalars())

    async def confirm(
        self,
        items: Sequence[tuple[MemoryRecord, str | None]],
        now: datetime,
        audit: AuditFor,
        *,
        extra: Sequence[AuditEventIn] = (),
    ) -> dict[str, MemoryRecord]:
        """Unchanged at the source: confirmed now (a stale memory is active again), the version recorded.

        Only rows still at the version the caller saw before asking the source are confirmed, so an
        answer given before a change event never undoes the event's `stale`. One transaction for a
        read's whole batch, with its audit events (and `extra`, the read's other
        attempts) chained in one append. Rows no longer live (superseded, forgotten or invalidated
        meanwhile) are left alone and missing from the answer.
        """
        m = memories.c
        confirmed: dict[str, MemoryRecord] = {}
        wanted = {r.id: (r, v) for r, v in items}
        async with self.store.transaction() as conn:
            rows = []
            if wanted:
                rows = (
                    (await conn.execute(sa.select(memories).where(m.id.in_(list(wanted)), m.status.in_(_LIVE))))
                    .mappings()
                    .all()
                )
            params = []
            for current in [_row_to_record(r) for r in rows]:
                seen = wanted[current.id][0]
                if current.tenant_id != seen.tenant_id or current.version != seen.version:
                    continue  # changed since the source was asked (an event marked it stale): not confirmed
                version = wanted[current.id][1]
                ref = current.source_ref
                if ref is not None and version is not None:
                    ref = ref.model_copy(update={"version": version})
                params.append(
                    {
                        "b_id": current.id,
                        "b_version": current.version,
                        "source_ref": ref.model_dump() if ref is not None else None,
                        "live_slot": live_slot_key(current),
                    }
                )
                confirmed[current.id] = current.model_copy(
                    update={
                        "status": Status.ACTIVE,
                        "last_confirmed_at": now,
                        "source_ref": ref,
                        "version": current.version + 1,
                        "updated_at": now,
                    }
                )
            if params:
                await conn.execute(
                    sa.update(memories)
                    .where(m.id == sa.bindparam("b_id"), m.version == sa.bindparam("b_version"))
                    .values(
                        status=Status.ACTIVE.value,
                        last_confirmed_at=now,
                        version=m.version + 1,
                        updated_at=now,
                    ),
                    params,
                )
            events = [audit(r) for r in confirmed.values()]
            await conn.run_sync(self.store._append_audit_many, [*events, *extra])
        return confirmed

    async def supersede(self, old: MemoryRecord, new: MemoryRecord, audit: AuditFor) -> MemoryRecord | None:
        """Changed at the source: `new` (the source's value, its version recorded) replaces `old` in one
        transaction, so there is never a moment with both live or neither. None when `old` is no longer
        live and `new` was never written (someone else moved the slot on first)."""
        assert new.status is Status.ACTIVE and new.supersedes == old.id
        async with self.store.transaction() as conn:
            existing = await conn.run_sync(_select_memory, new.tenant_id, new.id)
            if existing is not None:
                return existing  # a retried activity: the supersession already happened
            current = await conn.run_sync(_select_memory, old.tenant_id, old.id)
            if current is None or current.status not in LIVE_STATUSES or current.version != old.version:
                return None  # moved on since the source was asked
            if not await conn.run_sync(_mark_superseded, current, by=new.id, at=new.updated_at):
                return None
            row = _record_to_row(new) | {"derived_from": None, "idempotency_key": None}
            await conn.execute(sa.insert(memories).values(**row))
            stored = await conn.run_sync(_select_memory, new.tenant_id, new.id)
            assert stored is not None
            await conn.run_sync(self.store._append_audit, audit(stored))
        return stored

    async def invalidate(self, record: MemoryRecord, now: datetime, audit: AuditFor) -> MemoryRecord | None:
        """Gone at the source: `invalidated` (kept, blocked from use). Already invalidated: returned as is."""
        m = memories.c
        async with self.store.transaction() as conn:
            current = await conn.run_sync(_select_memory, record.tenant_id, record.id)
            if current is None:
                return None
            if current.status is Status.INVALIDATED:
                return current
            if current.status not in LIVE_STATUSES:
                return None
            if current.version != record.version:
                return None  # moved on since the source was asked
            await conn.execute(
                sa.update(memories)
                .where(m.id == current.id, m.version == current.version)
                .values(status=Status.INVALIDATED.value, live_slot=None, version=current.version + 1, updated_at=now)
            )
            updated = await conn.run_sync(_select_memory, record.tenant_id, record.id)
            assert updated is not None
            await conn.run_sync(self.store._append_audit, audit(updated))
        return updated

    async def due_periodic(
        self, volatile_systems: Sequence[str], volatile_types: Sequence[str], confirmed_before: datetime, limit: int
    ) -> list[tuple[str, str]]:
        """(tenant, memory id) of live source-backed memories the periodic sweep should re-check: a volatile
        source or type, last confirmed before `confirmed_before`, oldest confirmation first."""
        m = memories.c
        confirmed = sa.func.coalesce(m.last_confirmed_at, m.created_at)
        volatile = []
        if volatile_systems:
            volatile.append(m.source_ref["system"].as_string().in_(list(volatile_systems)))
        if volatile_types:
            volatile.append(m.type.in_(list(volatile_types)))
        if not volatile:
            return []
        stmt = (
            sa.select(m.tenant_id, m.id)
            .where(
                m.source_ref.is_not(None),
                m.status.in_(_LIVE),
                sa.or_(*volatile),
                confirmed < confirmed_before,
            )
            .order_by(confirmed, m.id)
            .limit(limit)
        )
        async with self.store.engine.connect() as conn:
            return [(r.tenant_id, r.id) for r in await conn.execute(stmt)]
