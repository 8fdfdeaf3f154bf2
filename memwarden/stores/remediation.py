"""The durable store's side of remediation: quarantine a rollback's writes at once, bring values back.

Three operations change which value of a slot is live, each in one transaction with its audit events:
- `quarantine` (the API, before it answers): every write a rollback selects leaves its slot and every
  read (a quarantined memory is not eligible), the rollback and its members are recorded;
- `restore` (RollbackWorkflow): the value each quarantined write superseded comes back as a new live
  version of the chain, unless the slot moved on since (a later, unselected write holds it);
- `revert` and `release` (RevertWorkflow): undo one supersession; let a quarantined write go back
  into use.
A value is never brought back by rewriting history: a new row copies it (`derived_from` names the row
copied, `supersedes` the one it replaces), and every older row stays as it was, for audit and undo.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from memwarden.records import (
    CONTENT_GONE_STATUSES,
    LIVE_STATUSES,
    QUARANTINABLE_STATUSES,
    MemoryRecord,
    Scope,
    Status,
    namespace_label,
)
from memwarden.remediation import (
    MemoriesSelector,
    SourceRecordSelector,
    WriterSelector,
    restored_id,
    rollback_id,
)
from memwarden.stores.audit import AuditEventIn
from memwarden.stores.cache import invalidation_prefixes
from memwarden.stores.sql import SqlStore
from memwarden.stores.sql import statements as Q
from memwarden.stores.sql.rows import _record_to_row, _row_to_record, _select_memory, live_slot_key
from memwarden.stores.sql_models import memories, rollback_members, rollback_sinks, rollbacks

CHUNK = 500
EVENT_NS = uuid.UUID("0b7e4c2a-61d3-4f8e-b5a9-3c2d1e0f9a87")


class RemediationError(Exception):
    """Why a revert, release or rollback cannot proceed: a stable code the API turns into a problem."""

    def __init__(self, code: str, field: str = "memory_id", index: int | None = None) -> None:
        super().__init__(code)
        self.code = code
        self.field = field
        self.index = index


class RollbackRow(BaseModel):
    id: str
    tenant_id: str
    requester: str
    selector: dict[str, Any]
    reason: str
    store: str | None
    status: str
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None
    workflow_id: str
    counts: dict[str, Any] | None
    cache_prefixes: list[str] | None
    receipt_hash: str | None
    audit_event_id: str | None


@dataclass(frozen=True)
class Brought:
    """What one revert, release or restore did: the new live row (if any), and the rows whose status changed."""

    live: MemoryRecord | None
    replaced: str | None
    restored_from: str | None
    outcome: str
    changed: tuple[str, ...] = ()


def event_id(operation: str, origin: str, memory_id: str) -> str:
    """An audit event's fixed id (appended once, however often its activity is retried)."""
    return f"{operation}-{uuid.uuid5(EVENT_NS, f'{origin}:{memory_id}')}"


def _chunks(items: Sequence[str]) -> list[list[str]]:
    return [list(items[i : i + CHUNK]) for i in range(0, len(items), CHUNK)]


def _copy_of(value: MemoryRecord, *, new_id: str, supersedes: str, now: datetime) -> MemoryRecord:
    """A new live version carrying `value`'s content and metadata (its slot, its provenance)."""
    return value.model_copy(
        update={
            "id": new_id,
            "status": Status.ACTIVE,
            "supersedes": supersedes,
            "superseded_by": None,
            "version": 1,
            "created_at": now,
            "updated_at": now,
            "valid_from": now,
            "last_used_at": None,
            "tombstoned_at": None,
            "purged_at": None,
        }
    )


class RemediationStore:
    """Remediation's repository; shares the engine (and the SQLite write lock) of `store`."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store

    # -- quarantine (the API, synchronously) ----------------------------------------------------

    async def _matches(
        self, conn: AsyncConnection, tenant_id: str, selector: object, store: str | None
    ) -> list[MemoryRecord]:
        m = memories.c
        stmt = sa.select(memories).where(m.tenant_id == tenant_id)
        if store is not None:
            stmt = stmt.where(m.scope == Scope.SHARED.value, m.store == store)
        if isinstance(selector, WriterSelector):
            stmt = stmt.where(
                m.provenance["writer"].as_string() == selector.writer,
                m.created_at >= selector.since,
                m.created_at < selector.until,
            )
        elif isinstance(selector, SourceRecordSelector):
            stmt = stmt.where(
                m.source_ref["system"].as_string() == selector.system,
                m.source_ref["key"].as_string() == selector.key,
            )
        elif isinstance(selector, MemoriesSelector):
            wanted = list(dict.fromkeys(selector.memory_ids))
            found: dict[str, MemoryRecord] = {}
            for chunk in _chunks(wanted):
                for row in (await conn.execute(stmt.where(m.id.in_(chunk)))).mappings():
                    found[row["id"]] = _row_to_record(row)
            for i, memory_id in enumerate(selector.memory_ids):
                if memory_id not in found:
                    raise RemediationError("not_found", "selector.memory_ids", i)
            return [found[i] for i in wanted]
        else:  # pragma: no cover - the union is closed
            raise TypeError(type(selector).__name__)
        return [_row_to_record(r) for r in (await conn.execute(stmt)).mappings()]

    async def quarantine(
        self,
        *,
        tenant_id: str,
        requester: str,
        selector: object,
        redacted: dict[str, Any],
        reason: str,
        store: str | None,
        now: datetime,
    ) -> tuple[RollbackRow, bool]:
        """Quarantine every live or pending write the selector matches and record the rollback: one transaction.

        Returns (rollback, created). The same request again, once its writes are quarantined, finds nothing
        new and returns the rollback that covers it (created False). `RemediationError("nothing_matched")`
        when the selector matches no write in use and no earlier rollback of it exists.
        """
        attempt = functools.partial(
            self._quarantine,
            tenant_id=tenant_id,
            requester=requester,
            selector=selector,
            redacted=redacted,
            reason=reason,
            store=store,
            now=now,
        )
        try:
            return await attempt()
        except IntegrityError:  # a racing twin inserted the same rollback id first: this pass finds it
            return await attempt()

    async def _quarantine(
        self,
        *,
        tenant_id: str,
        requester: str,
        selector: object,
        redacted: dict[str, Any],
        reason: str,
        store: str | None,
        now: datetime,
    ) -> tuple[RollbackRow, bool]:
        m = memories.c
        async with self.store.transaction() as conn:
            rows = await self._matches(conn, tenant_id, selector, store)
            fresh = sorted((r for r in rows if r.status in QUARANTINABLE_STATUSES), key=lambda r: (r.created_at, r.id))
            if not fresh:
                existing = await self._existing(conn, tenant_id, redacted, store)
                if existing is None:
                    raise RemediationError("nothing_matched", "selector")
                return existing, False
            ids = [r.id for r in fresh]
            rid = rollback_id(tenant_id, redacted, store, ids)
            found = await self._get(conn, tenant_id, rid)
            if found is not None:
                return found, False
            prefixes = sorted({p for r in fresh for p in invalidation_prefixes(tenant_id, r.scope, r.owner_id)})
            counts = {"quarantined": len(ids), "pending": sum(1 for r in fresh if r.status is Status.PENDING)}
            await conn.execute(
                sa.insert(rollbacks).values(
                    id=rid,
                    tenant_id=tenant_id,
                    requester=requester,
                    selector=redacted,
                    reason=reason,
                    store=store,
                    status="quarantined",
                    created_at=now,
                    updated_at=now,
                    workflow_id=f"rollback-{rid}",
                    counts=counts,
                    cache_prefixes=prefixes,
                )
            )
            # The selector's matches no longer in use (an earlier poisoned version, already superseded) are
            # members too, never quarantined: a restore must not bring their value back, and their reads
            # count in the blast radius.
            history = [r for r in rows if r.status not in QUARANTINABLE_STATUSES]
            prior = {r.id: r.status.value for r in [*fresh, *history]}
            in_use = set(ids)
            for chunk in _chunks(sorted(prior)):
                await conn.execute(
                    sa.insert(rollback_members),
                    [
                        {
                            "rollback_id": rid,
                            "memory_id": i,
                            "tenant_id": tenant_id,
                            "prior_status": prior[i],
                            "outcome": None if i in in_use else "not_in_use",
                        }
                        for i in chunk
                    ],
                )
            for chunk in _chunks(ids):
                await conn.execute(
                    sa.update(memories)
                    .where(
                        m.tenant_id == tenant_id,
                        m.id.in_(chunk),
                        m.status.in_([s.value for s in QUARANTINABLE_STATUSES]),
                    )
                    .values(status=Status.QUARANTINED.value, live_slot=None, version=m.version + 1, updated_at=now)
                )
            await conn.run_sync(
                self.store._append_audit_many,
                [
                    AuditEventIn(
                        id=event_id("quarantine", rid, r.id),
                        at=now,
                        tenant_id=tenant_id,
                        actor=requester,
                        operation="quarantine",
                        memory_id=r.id,
                        namespace=namespace_label(r),
                        reason=reason,
                        workflow_id=f"rollback-{rid}",
                        details={"rollback_id": rid, "selector": redacted["kind"], "prior_status": r.status.value},
                    )
                    for r in fresh
                ]
                + [
                    AuditEventIn(
                        id=f"rollback-request-{rid}",
                        at=now,
                        tenant_id=tenant_id,
                        actor=requester,
                        operation="rollback_requested",
                        reason=reason,
                        workflow_id=f"rollback-{rid}",
                        details={"rollback_id": rid, "selector": redacted, "store": store, "counts": counts},
                    )
                ],
            )
            created = await self._get(conn, tenant_id, rid)
        assert created is not None
        return created, True

    async def _existing(
        self, conn: AsyncConnection, tenant_id: str, redacted: dict[str, Any], store: str | None
    ) -> RollbackRow | None:
        r = rollbacks.c
        rows = (
            await conn.execute(
                sa.select(rollbacks).where(r.tenant_id == tenant_id).order_by(r.created_at.desc()).limit(200)
            )
        ).mappings()
        for row in rows:
            if row["selector"] == redacted and row["store"] == store:
                return RollbackRow.model_validate(dict(row))
        return None

    async def _get(self, conn: AsyncConnection, tenant_id: str, rid: str) -> RollbackRow | None:
        r = rollbacks.c
        row = (await conn.execute(sa.select(rollbacks).where(r.tenant_id == tenant_id, r.id == rid))).mappings().first()
        return RollbackRow.model_validate(dict(row)) if row is not None else None

    async def get(self, tenant_id: str, rid: str) -> RollbackRow | None:
        async with self.store.engine.connect() as conn:
            return await self._get(conn, tenant_id, rid)

    async def members(self, tenant_id: str, rid: str) -> list[dict[str, Any]]:
        rm = rollback_members.c
        async with self.store.engine.connect() as conn:
            rows = await conn.execute(
                sa.select(rm.memory_id, rm.prior_status, rm.restored_id, rm.outcome)
                .where(rm.rollback_id == rid, rm.tenant_id == tenant_id)
                .order_by(rm.memory_id)
            )
            return [dict(r._mapping) for r in rows]

    async def rollbacks_of(self, tenant_id: str, memory_id: str) -> list[RollbackRow]:
        """The rollbacks that quarantined this memory (a moderator's release or forget is checked against them)."""
        rm = rollback_members.c
        async with self.store.engine.connect() as conn:
            ids = [
                r[0]
                for r in await conn.execute(
                    sa.select(rm.rollback_id).where(rm.tenant_id == tenant_id, rm.memory_id == memory_id)
                )
            ]
            found = [await self._get(conn, tenant_id, i) for i in ids]
        return [f for f in found if f is not None]

    # -- restore (RollbackWorkflow) --------------------------------------------------------------

    async def restore(self, tenant_id: str, rid: str, now: datetime) -> list[Brought]:
        """For each quarantined member, bring back the value it superseded (skipping the rollback's own
        writes in the chain), unless the slot moved on; one transaction per member. Idempotent: a
        member with an outcome is done, and the restoring row's id is fixed by (rollback, member)."""
        done: list[Brought] = []
        pending = [x for x in await self.members(tenant_id, rid) if x["outcome"] is None]
        members = {x["memory_id"] for x in await self.members(tenant_id, rid)}
        async with self.store.engine.connect() as conn:
            order = {
                row.id: (row.created_at, row.id)
                for chunk in _chunks([x["memory_id"] for x in pending])
                for row in await conn.execute(
                    sa.select(memories.c.id, memories.c.created_at).where(
                        memories.c.tenant_id == tenant_id, memories.c.id.in_(chunk)
                    )
                )
            }
        for member in sorted(pending, key=lambda x: order.get(x["memory_id"], (now, x["memory_id"]))):
            done.append(await self._restore_one(tenant_id, rid, member["memory_id"], members, now))
        return done

    async def _restore_one(self, tenant_id: str, rid: str, memory_id: str, members: set[str], now: datetime) -> Brought:
        rm = rollback_members.c
        async with self.store.transaction() as conn:
            quarantined = await conn.run_sync(_select_memory, tenant_id, memory_id)
            brought = await self._bring_back_predecessor(conn, tenant_id, rid, quarantined, members, now)
            await conn.execute(
                sa.update(rollback_members)
                .where(rm.rollback_id == rid, rm.memory_id == memory_id)
                .values(outcome=brought.outcome, restored_id=brought.live.id if brought.live else None)
            )
        return brought

    async def _bring_back_predecessor(
        self,
        conn: AsyncConnection,
        tenant_id: str,
        rid: str,
        quarantined: MemoryRecord | None,
        members: set[str],
        now: datetime,
    ) -> Brought:
        if quarantined is None or quarantined.status is not Status.QUARANTINED:
            return Brought(None, None, None, "not_quarantined")
        if quarantined.supersedes is None:
            return Brought(None, quarantined.id, None, "nothing_superseded")
        value = await conn.run_sync(_select_memory, tenant_id, quarantined.supersedes)
        seen = {quarantined.id}
        while value is not None and value.id in members and value.supersedes and value.id not in seen:
            seen.add(value.id)  # the rollback's own earlier write in this chain: look further back
            value = await conn.run_sync(_select_memory, tenant_id, value.supersedes)
        if value is None or value.id in members or value.content is None or value.status in CONTENT_GONE_STATUSES:
            return Brought(None, quarantined.id, None, "predecessor_gone")
        holder = await self._holder(conn, quarantined)
        if holder is not None:
            outcome = "predecessor_live" if holder.id == value.id else "slot_moved_on"
            return Brought(None, quarantined.id, value.id, outcome)
        if value.status in LIVE_STATUSES:
            return Brought(None, quarantined.id, value.id, "predecessor_live")
        new = _copy_of(value, new_id=restored_id(rid, quarantined.id), supersedes=quarantined.id, now=now)
        live = await self._insert_live(conn, new, derived_from=value.id)
        await conn.execute(
            sa.update(memories)
            .where(memories.c.tenant_id == tenant_id, memories.c.id == quarantined.id)
            .values(superseded_by=live.id, updated_at=now, version=memories.c.version + 1)
        )
        await conn.run_sync(
            self.store._append_audit,
            AuditEventIn(
                id=event_id("restore", rid, quarantined.id),
                at=now,
                tenant_id=tenant_id,
                actor="system:rollback",
                operation="restore",
                memory_id=live.id,
                namespace=namespace_label(live),
                reason="rollback",
                workflow_id=f"rollback-{rid}",
                hash_after=live.content_hash,
                details={"rollback_id": rid, "restored_from": value.id, "replaces": quarantined.id},
            ),
        )
        return Brought(live, quarantined.id, value.id, "restored", (quarantined.id,))

    async def _holder(self, conn: AsyncConnection, record: MemoryRecord) -> MemoryRecord | None:
        key = live_slot_key(record)
        if key is None:
            return None
        query = Q.SLOT_HOLDER_FOR_UPDATE if self.store.dialect == "postgresql" else Q.SLOT_HOLDER
        params = {"tenant_id": record.tenant_id, "owner_id": record.owner_id, "live_slot": key}
        row = (await conn.execute(query, params)).mappings().first()
        return _row_to_record(row) if row is not None else None

    async def _insert_live(self, conn: AsyncConnection, record: MemoryRecord, *, derived_from: str) -> MemoryRecord:
        values = _record_to_row(record)
        values["idempotency_key"] = None
        values["derived_from"] = [derived_from]
        row = (await conn.execute(Q.INSERT_MEMORY, values)).mappings().one()
        return _row_to_record(row)

    async def _supersede(self, conn: AsyncConnection, record: MemoryRecord, *, by: str, now: datetime) -> None:
        m = memories.c
        result = await conn.execute(
            sa.update(memories)
            .where(m.tenant_id == record.tenant_id, m.id == record.id, m.version == record.version)
            .values(
                status=Status.SUPERSEDED.value,
                superseded_by=by,
                live_slot=None,
                version=record.version + 1,
                updated_at=now,
            )
        )
        if result.rowcount != 1:
            raise RemediationError("version_conflict")

    # -- revert and release (RevertWorkflow) -----------------------------------------------------

    async def revert(self, tenant_id: str, memory_id: str, actor: str, workflow_id: str, now: datetime) -> Brought:
        """Undo the supersession `memory_id` (the live version) made: its predecessor's value becomes a new
        live version and `memory_id` is superseded by it. The same revert again returns the first one's row."""
        new_id = restored_id("revert", memory_id)
        async with self.store.transaction() as conn:
            done = await conn.run_sync(_select_memory, tenant_id, new_id)
            if done is not None:
                reverted = await conn.run_sync(_select_memory, tenant_id, memory_id)
                return Brought(done, memory_id, reverted.supersedes if reverted else None, "already_reverted")
            live = await conn.run_sync(_select_memory, tenant_id, memory_id)
            if live is None:
                raise RemediationError("not_found")
            if live.status not in LIVE_STATUSES:
                raise RemediationError("not_live")
            if live.supersedes is None:
                raise RemediationError("nothing_to_revert")
            value = await conn.run_sync(_select_memory, tenant_id, live.supersedes)
            if value is None or value.content is None or value.status in CONTENT_GONE_STATUSES:
                raise RemediationError("predecessor_gone")
            if value.status is Status.QUARANTINED:
                raise RemediationError("predecessor_quarantined")
            await self._supersede(conn, live, by=new_id, now=now)
            brought = await self._insert_live(
                conn, _copy_of(value, new_id=new_id, supersedes=live.id, now=now), derived_from=value.id
            )
            await conn.run_sync(
                self.store._append_audit,
                AuditEventIn(
                    id=event_id("revert", "revert", memory_id),
                    at=now,
                    tenant_id=tenant_id,
                    actor=actor,
                    operation="revert",
                    memory_id=brought.id,
                    namespace=namespace_label(brought),
                    reason="revert",
                    workflow_id=workflow_id,
                    hash_before=live.content_hash,
                    hash_after=brought.content_hash,
                    details={"reverted": live.id, "restored_from": value.id, "supersedes": live.id},
                ),
            )
        return Brought(brought, live.id, value.id, "reverted", (live.id,))

    async def release(self, tenant_id: str, memory_id: str, actor: str, workflow_id: str, now: datetime) -> Brought:
        """A quarantined write goes back into use: in place when its slot is free, else as a new live version of
        its value superseding the slot's holder (the quarantined row is then `superseded`). Idempotent."""
        new_id = restored_id("release", memory_id)
        async with self.store.transaction() as conn:
            copy = await conn.run_sync(_select_memory, tenant_id, new_id)
            if copy is not None:
                return Brought(copy, None, memory_id, "already_released")
            row = await conn.run_sync(_select_memory, tenant_id, memory_id)
            if row is None:
                raise RemediationError("not_found")
            if row.status is not Status.QUARANTINED:
                if row.status is Status.ACTIVE:
                    return Brought(row, None, memory_id, "already_released")
                raise RemediationError("not_quarantined")
            holder = await self._holder(conn, row)
            if holder is None:
                released = row.model_copy(update={"status": Status.ACTIVE, "updated_at": now})
                m = memories.c
                result = await conn.execute(
                    sa.update(memories)
                    .where(m.tenant_id == tenant_id, m.id == memory_id, m.version == row.version)
                    .values(
                        status=Status.ACTIVE.value,
                        live_slot=live_slot_key(released),
                        superseded_by=None,
                        version=row.version + 1,
                        updated_at=now,
                    )
                )
                if result.rowcount != 1:
                    raise RemediationError("version_conflict")
                live = await conn.run_sync(_select_memory, tenant_id, memory_id)
                assert live is not None
                replaced, changed = None, ()
            else:
                await self._supersede(conn, holder, by=new_id, now=now)
                live = await self._insert_live(
                    conn, _copy_of(row, new_id=new_id, supersedes=holder.id, now=now), derived_from=row.id
                )
                await conn.execute(
                    sa.update(memories)
                    .where(memories.c.tenant_id == tenant_id, memories.c.id == memory_id)
                    .values(
                        status=Status.SUPERSEDED.value,
                        superseded_by=new_id,
                        version=memories.c.version + 1,
                        updated_at=now,
                    )
                )
                replaced, changed = holder.id, (holder.id, memory_id)
            await conn.run_sync(
                self.store._append_audit,
                AuditEventIn(
                    id=event_id("release", "release", memory_id),
                    at=now,
                    tenant_id=tenant_id,
                    actor=actor,
                    operation="release",
                    memory_id=live.id,
                    namespace=namespace_label(live),
                    reason="released",
                    workflow_id=workflow_id,
                    hash_after=live.content_hash,
                    details={"released": memory_id, "supersedes": replaced},
                ),
            )
        return Brought(live, replaced, memory_id, "released", changed)

    # -- progress and the receipt ----------------------------------------------------------------

    async def set_status(self, tenant_id: str, rid: str, status: str, now: datetime) -> None:
        r = rollbacks.c
        async with self.store.transaction() as conn:
            await conn.execute(
                sa.update(rollbacks)
                .where(r.tenant_id == tenant_id, r.id == rid, r.status != "verified")
                .values(status=status, updated_at=now)
            )

    async def sink_started(
        self, rid: str, name: str, method: str, *, workflow_id: str, run_id: str, now: datetime
    ) -> None:
        s = rollback_sinks.c
        stmt = self.store._insert(rollback_sinks).values(
            rollback_id=rid,
            name=name,
            method=method,
            status="applying",
            attempts=1,
            workflow_id=workflow_id,
            run_id=run_id,
            started_at=now,
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[s.rollback_id, s.name],
            set_={"attempts": s.attempts + 1, "run_id": run_id},
            where=s.status != "verified",
        )
        async with self.store.transaction() as conn:
            await conn.execute(stmt)

    async def sink_applied(self, rid: str, name: str, applied: int) -> None:
        s = rollback_sinks.c
        async with self.store.transaction() as conn:
            await conn.execute(
                sa.update(rollback_sinks)
                .where(s.rollback_id == rid, s.name == name, s.applied < applied)
                .values(applied=applied)
            )

    async def sink_checked(self, rid: str, name: str, evidence: dict[str, Any], ok: bool, now: datetime) -> None:
        s = rollback_sinks.c
        values: dict[str, Any] = {"evidence": evidence, "status": "verified" if ok else "applying"}
        if ok:
            values["verified_at"] = now
        async with self.store.transaction() as conn:
            await conn.execute(
                sa.update(rollback_sinks)
                .where(s.rollback_id == rid, s.name == name, s.status != "verified")
                .values(**values)
            )

    async def sinks(self, rid: str) -> list[dict[str, Any]]:
        s = rollback_sinks.c
        async with self.store.engine.connect() as conn:
            rows = (
                await conn.execute(sa.select(rollback_sinks).where(s.rollback_id == rid).order_by(s.name))
            ).mappings()
            return [dict(r) for r in rows]

    async def finish(
        self, tenant_id: str, rid: str, *, receipt_hash: str, audit_event_id: str, counts: dict[str, Any], now: datetime
    ) -> bool:
        """The receipt is chained: the rollback is `verified`. True only for the call that moved it."""
        r = rollbacks.c
        async with self.store.transaction() as conn:
            result = await conn.execute(
                sa.update(rollbacks)
                .where(r.tenant_id == tenant_id, r.id == rid, r.status != "verified")
                .values(
                    status="verified",
                    completed_at=sa.func.coalesce(r.completed_at, now),
                    receipt_hash=receipt_hash,
                    audit_event_id=audit_event_id,
                    counts=counts,
                    updated_at=now,
                )
            )
        return result.rowcount == 1
