"""The durable store's side of Forget: resolve a selector, tombstone at once, track sinks, purge content.

Everything a deletion needs from SQL, in one repository over `SqlStore`'s engine. Bulk statements
(chunked IN lists), not one status change per row: a subject with 10k memories is tombstoned in one
transaction, before the API answers.

Tombstone rows stay (id, tenant, namespace, status, times) so that a restore, a lagging replica or a
retried commit can never bring deleted content back; their content and content hash are removed,
and with them what the row said about what it was and whose (`memwarden.stores.tombstones`). A
deletion's requester is stored as a pseudonym.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sqlite3
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from pydantic import BaseModel
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from memwarden.forget import (
    SUBJECT_REF_PREFIX,
    AgentSelector,
    ExpiredSelector,
    MemorySelector,
    OwnerSelector,
    QuarantinedSelector,
    SlotSelector,
    SourceSelector,
    TenantSelector,
    deletion_id,
    subject_ref_prefix,
)
from memwarden.policy.retention import DEFAULT_CLASSES, RetentionClass
from memwarden.records import FORGOTTEN_STATUSES, Scope, Status, namespace_label
from memwarden.stores.audit import AuditEventIn, Operation
from memwarden.stores.cache import invalidation_prefixes, tenant_prefix
from memwarden.stores.content_keys import destroy_subject_key
from memwarden.stores.sql import SqlStore
from memwarden.stores.sql.imports import forget_parked_lines
from memwarden.stores.sql_models import (
    candidates,
    deletion_members,
    deletion_sinks,
    deletions,
    memories,
    quarantined_sources,
    rollback_members,
)
from memwarden.stores.tombstones import scrub, stored_requester, unscrubbed

CHUNK = 500
MEMBER_EVENT_NS = uuid.UUID("5f0e9a52-7c1b-4d8e-a3f6-2b9c8d7e6a14")
PURGED_HASH = ""
"""What a purged row's content_hash becomes: a hash of short content is guessable, so it goes too."""

_STATUS_FROM: dict[str, tuple[str, ...]] = {
    "purging": ("tombstoned", "failed"),
    "failed": ("tombstoned", "purging"),
    "verified": ("tombstoned", "purging", "failed"),
}


def member_event_id(operation: str, did: str, memory_id: str) -> str:
    """The audit id of one memory's `delete`/`expire` event in one deletion (appended once)."""
    return f"{operation}-{uuid.uuid5(MEMBER_EVENT_NS, f'{did}:{memory_id}')}"


class MemoryNotFound(LookupError):
    """The selector names one memory this tenant does not hold (-> 404)."""


class DeletionRow(BaseModel):
    id: str
    tenant_id: str
    requester: str
    selector: dict[str, Any]
    reason: str | None
    status: str
    subject_hash: str | None
    created_at: datetime
    updated_at: datetime
    completed_at: datetime | None
    workflow_id: str | None
    counts: dict[str, Any] | None
    receipt_hash: str | None
    selector_key: str | None
    cache_prefixes: list[str] | None
    audit_event_id: str | None


class SinkRow(BaseModel):
    name: str
    method: str
    status: str
    purged: int
    verified_at: datetime | None
    evidence: dict[str, Any] | None
    attempts: int
    workflow_id: str | None
    run_id: str | None
    started_at: datetime | None


def _chunks(items: list[str]) -> list[list[str]]:
    return [items[i : i + CHUNK] for i in range(0, len(items), CHUNK)]


class ForgetStore:
    """Forget's repository; shares the engine (and SQLite write lock discipline) of `store`."""

    def __init__(self, store: SqlStore, retention: dict[str, RetentionClass] | None = None) -> None:
        self.store = store
        self.retention = retention if retention is not None else DEFAULT_CLASSES
        """Retention classes the `expired` selector honours (holds, age limits); types alone by default."""

    def _expired(self, now: datetime) -> sa.ColumnElement[bool]:
        """`class_expired` in SQL: past expires_at unless held, or past the class's age limit."""
        m = memories.c
        held = sorted(name for name, c in self.retention.items() if c.hold)
        by_ttl = sa.and_(m.expires_at.is_not(None), m.expires_at <= now)
        if held:
            by_ttl = sa.and_(by_ttl, m.retention_class.not_in(held))
        by_age = [
            sa.and_(m.retention_class == name, m.created_at <= now - timedelta(days=c.max_age_days))
            for name, c in sorted(self.retention.items())
            if c.max_age_days is not None and not c.hold
        ]
        return sa.or_(by_ttl, *by_age)

    # -- resolving and tombstoning ----------------------------------------------------------

    async def _rows(self, conn: AsyncConnection, tenant_id: str, selector: object, now: datetime) -> list[Any]:
        m = memories.c
        cols = (m.id, m.status, m.scope, m.owner_id, m.agent_id, m.store, m.purged_at)
        base = sa.select(*cols).where(m.tenant_id == tenant_id)
        if isinstance(selector, MemorySelector):
            first = (await conn.execute(base.where(m.id == selector.memory_id))).first()
            if first is None:
                raise MemoryNotFound(selector.memory_id)
            return await self._chain(conn, tenant_id, selector.memory_id)
        if isinstance(selector, SlotSelector):
            stmt = base.where(m.owner_id == selector.owner_id, m.slot == selector.slot)
            if selector.scope is not None:
                stmt = stmt.where(m.scope == selector.scope)
            if selector.agent_id is not None:
                stmt = stmt.where(m.agent_id == selector.agent_id)
            if selector.store is not None:
                stmt = stmt.where(m.store == selector.store)
        elif isinstance(selector, OwnerSelector):
            stmt = base.where(m.owner_id == selector.owner_id)
        elif isinstance(selector, AgentSelector):
            stmt = base.where(m.scope == Scope.AGENT.value, m.agent_id == selector.agent_id)
            if selector.owner_id is not None:
                stmt = stmt.where(m.owner_id == selector.owner_id)
        elif isinstance(selector, SourceSelector):
            stmt = base.where(
                m.source_ref["system"].as_string() == selector.system,
                m.source_ref["key"].as_string() == selector.key,
            )
        elif isinstance(selector, TenantSelector):
            stmt = base
        elif isinstance(selector, QuarantinedSelector):
            rm = rollback_members.c
            quarantined = sa.select(rm.memory_id).where(
                rm.tenant_id == tenant_id, rm.rollback_id == selector.rollback_id
            )
            stmt = base.where(m.id.in_(quarantined), m.status == Status.QUARANTINED.value)
            if selector.stores is not None:
                stmt = stmt.where(m.scope == Scope.SHARED.value, m.store.in_(sorted(selector.stores)))
        elif isinstance(selector, ExpiredSelector):
            stmt = base.where(
                self._expired(now),
                m.status.in_([Status.ACTIVE.value, Status.STALE.value, Status.PENDING.value, Status.EXPIRED.value]),
            )
        else:  # pragma: no cover - the union is closed
            raise TypeError(type(selector).__name__)
        return list((await conn.execute(stmt)).all())

    async def _chain(self, conn: AsyncConnection, tenant_id: str, memory_id: str) -> list[Any]:
        """Every version linked to this memory by supersedes/superseded_by, in both directions."""
        m = memories.c
        seen: dict[str, Any] = {}
        frontier = [memory_id]
        while frontier:
            rows = (
                await conn.execute(
                    sa.select(
                        m.id,
                        m.status,
                        m.scope,
                        m.owner_id,
                        m.agent_id,
                        m.store,
                        m.purged_at,
                        m.supersedes,
                        m.superseded_by,
                    ).where(
                        m.tenant_id == tenant_id,
                        sa.or_(m.id.in_(frontier), m.supersedes.in_(frontier), m.superseded_by.in_(frontier)),
                    )
                )
            ).all()
            frontier = []
            for row in rows:
                if row.id not in seen:
                    seen[row.id] = row
                    frontier.append(row.id)
        return list(seen.values())

    async def begin(
        self,
        *,
        tenant_id: str,
        requester: str,
        selector: object,
        redacted_selector: dict[str, Any],
        selector_key: str,
        reason: str,
        subject_hash: str | None,
        now: datetime,
        handle_hash: str | None = None,
    ) -> tuple[DeletionRow, bool]:
        """Tombstone what the selector matches and record the deletion, in one transaction.

        `handle_hash` is the erased owner's hash under the subject-handle key (memwarden.keys): the
        handles parked for them are named by it, and go in the same transaction.

        Returns (deletion, created). The same request again, with nothing new to delete, returns the
        deletion that already covers it (created False): same id, same outcome. Two identical requests
        racing on PostgreSQL meet on the deterministic deletion id: the loser's insert conflicts, and
        its retry finds the winner's deletion.
        """
        attempt = functools.partial(
            self._begin,
            tenant_id=tenant_id,
            requester=requester,
            selector=selector,
            redacted_selector=redacted_selector,
            selector_key=selector_key,
            reason=reason,
            subject_hash=subject_hash,
            now=now,
            handle_hash=handle_hash,
        )
        try:
            return await attempt()
        except IntegrityError:  # a racing twin inserted the same deletion id first: this pass finds it
            return await attempt()

    async def _begin(
        self,
        *,
        tenant_id: str,
        requester: str,
        selector: object,
        redacted_selector: dict[str, Any],
        selector_key: str,
        reason: str,
        subject_hash: str | None,
        now: datetime,
        handle_hash: str | None,
    ) -> tuple[DeletionRow, bool]:
        m = memories.c
        requester = stored_requester(self.store._pseudonyms, tenant_id, requester)
        async with self.store.transaction() as conn:
            await self._drop_subject_refs(conn, tenant_id, selector, handle_hash, now)
            if isinstance(selector, OwnerSelector) and subject_hash:  # old content hashes now match nothing
                await destroy_subject_key(conn, tenant_id, subject_hash)
            elif isinstance(selector, TenantSelector):
                await destroy_subject_key(conn, tenant_id, None)
            rows = await self._rows(conn, tenant_id, selector, now)
            fresh = [r for r in rows if Status(r.status) not in FORGOTTEN_STATUSES and r.purged_at is None]
            if not fresh:
                existing = await self._existing(conn, tenant_id, selector_key, [r.id for r in rows])
                if existing is not None:
                    return existing, False
            ids = sorted(r.id for r in fresh)
            did = deletion_id(selector_key, ids)
            found = await self._get(conn, tenant_id, did)
            if found is not None:
                return found, False
            if isinstance(selector, TenantSelector):
                prefixes = [tenant_prefix(tenant_id)]
            else:
                prefixes = sorted(
                    {p for r in fresh for p in invalidation_prefixes(tenant_id, Scope(r.scope), r.owner_id)}
                )
            await conn.execute(
                sa.insert(deletions).values(
                    id=did,
                    tenant_id=tenant_id,
                    requester=requester,
                    selector=redacted_selector,
                    reason=reason,
                    status="tombstoned",
                    subject_hash=subject_hash,
                    created_at=now,
                    updated_at=now,
                    workflow_id=f"forget-{did}",
                    counts={"memories": len(ids)},
                    selector_key=selector_key,
                    cache_prefixes=prefixes,
                )
            )
            expire = isinstance(selector, ExpiredSelector)
            prior = {r.id: r.status for r in fresh}
            for chunk in _chunks([r.id for r in fresh]):
                await conn.execute(
                    sa.insert(deletion_members),
                    [
                        {"deletion_id": did, "memory_id": mid, "tenant_id": tenant_id, "prior_status": prior[mid]}
                        for mid in chunk
                    ],
                )
                target = Status.EXPIRED.value if expire else Status.TOMBSTONED.value
                await conn.execute(
                    sa.update(memories)
                    .where(m.tenant_id == tenant_id, m.id.in_(chunk))
                    .values(
                        status=target,
                        live_slot=None,
                        tombstoned_at=now,
                        version=m.version + 1,
                        updated_at=now,
                    )
                )
            # One event per memory, in this transaction: `audit show MEMORY_ID` ends with its deletion
            # (or expiry), and the event exists exactly when the tombstone does.
            operation = Operation.EXPIRE if expire else Operation.DELETE
            await conn.run_sync(
                self.store._append_audit_many,
                [
                    AuditEventIn(
                        id=member_event_id(operation, did, r.id),
                        at=now,
                        tenant_id=tenant_id,
                        actor=requester,
                        operation=operation,
                        memory_id=r.id,
                        namespace=namespace_label(r),
                        reason=reason,
                        workflow_id=f"forget-{did}",
                        deletion_id=did,
                        details={"selector": redacted_selector.get("kind"), "prior_status": r.status},
                    )
                    for r in sorted(fresh, key=lambda r: r.id)
                ],
            )
            if isinstance(selector, SourceSelector):
                q = self.store.insert(quarantined_sources).values(
                    tenant_id=tenant_id, system=selector.system, key=selector.key, deletion_id=did, created_at=now
                )
                await conn.execute(q.on_conflict_do_nothing())
            created = await self._get(conn, tenant_id, did)
        assert created is not None
        return created, True

    async def _drop_subject_refs(
        self, conn: AsyncConnection, tenant_id: str, selector: object, handle_hash: str | None, now: datetime
    ) -> None:
        """An erased subject's parked handles go with the tombstone, so no workflow can resolve them again.

        Owner erasure: the handles under that subject's handle hash; offboarding: every handle of the tenant.
        A bulk import's lines still parked for them go too, each decided `ERROR forgotten`.
        """
        c = candidates.c
        if isinstance(selector, OwnerSelector) and handle_hash:
            pattern = f"{subject_ref_prefix(handle_hash)}%"
            await forget_parked_lines(conn, tenant_id, handle_hash, now)
        elif isinstance(selector, TenantSelector):
            pattern = f"{SUBJECT_REF_PREFIX}%"
            await forget_parked_lines(conn, tenant_id, None, now)
        else:
            return
        await conn.execute(sa.delete(candidates).where(c.tenant_id == tenant_id, c.ref.like(pattern)))

    async def _existing(
        self, conn: AsyncConnection, tenant_id: str, selector_key: str, memory_ids: list[str]
    ) -> DeletionRow | None:
        d = deletions.c
        row = (
            await conn.execute(
                sa.select(d.id)
                .where(d.tenant_id == tenant_id, d.selector_key == selector_key)
                .order_by(d.created_at.desc())
                .limit(1)
            )
        ).first()
        if row is None and memory_ids:
            dm = deletion_members.c
            row = (
                await conn.execute(
                    sa.select(dm.deletion_id)
                    .join(deletions, deletions.c.id == dm.deletion_id)
                    .where(dm.tenant_id == tenant_id, dm.memory_id.in_(memory_ids[:CHUNK]))
                    .order_by(d.created_at.desc())
                    .limit(1)
                )
            ).first()
        return await self._get(conn, tenant_id, row[0]) if row is not None else None

    async def _get(self, conn: AsyncConnection, tenant_id: str, did: str) -> DeletionRow | None:
        d = deletions.c
        row = (await conn.execute(sa.select(deletions).where(d.tenant_id == tenant_id, d.id == did))).mappings().first()
        return DeletionRow.model_validate(dict(row)) if row is not None else None

    async def tenants_with_expired(self, now: datetime) -> list[str]:
        """Tenants holding memories past `expires_at` whose content is not purged yet."""
        m = memories.c
        async with self.store.engine.connect() as conn:
            rows = await conn.execute(
                sa.select(m.tenant_id)
                .where(
                    self._expired(now),
                    m.purged_at.is_(None),
                    m.status.in_([Status.ACTIVE.value, Status.STALE.value, Status.PENDING.value]),
                )
                .distinct()
            )
            return sorted(r[0] for r in rows)

    async def is_quarantined(self, tenant_id: str, system: str, key: str) -> bool:
        """Whether a source record was forgotten as poisoned (the gate refuses new memories citing it)."""
        q = quarantined_sources.c
        async with self.store.engine.connect() as conn:
            found = await conn.scalar(
                sa.select(q.deletion_id).where(q.tenant_id == tenant_id, q.system == system, q.key == key)
            )
        return found is not None

    # -- reading -------------------------------------------------------------------------------

    async def get(self, tenant_id: str, did: str) -> DeletionRow | None:
        async with self.store.engine.connect() as conn:
            return await self._get(conn, tenant_id, did)

    async def members(self, tenant_id: str, did: str) -> list[str]:
        dm = deletion_members.c
        async with self.store.engine.connect() as conn:
            rows = await conn.execute(
                sa.select(dm.memory_id).where(dm.deletion_id == did, dm.tenant_id == tenant_id).order_by(dm.memory_id)
            )
            return [r[0] for r in rows]

    async def sinks(self, did: str) -> list[SinkRow]:
        s = deletion_sinks.c
        async with self.store.engine.connect() as conn:
            rows = (
                await conn.execute(sa.select(deletion_sinks).where(s.deletion_id == did).order_by(s.name))
            ).mappings()
            return [SinkRow.model_validate(dict(r)) for r in rows]

    # -- progress ------------------------------------------------------------------------------

    async def set_status(self, tenant_id: str, did: str, status: str, now: datetime) -> None:
        """Deletion status, forward only: tombstoned -> purging -> verified; `failed` when its workflow
        ended without a receipt, and back to `purging` when a repeated request restarts it."""
        d = deletions.c
        earlier = _STATUS_FROM[status]
        async with self.store.transaction() as conn:
            await conn.execute(
                sa.update(deletions)
                .where(d.tenant_id == tenant_id, d.id == did, d.status.in_(earlier))
                .values(status=status, updated_at=now)
            )

    async def sink_started(
        self, did: str, name: str, method: str, *, workflow_id: str, run_id: str, now: datetime
    ) -> None:
        """A purge attempt began: counts attempts; `started_at` keeps the first one."""
        s = deletion_sinks.c
        stmt = self.store.insert(deletion_sinks).values(
            deletion_id=did,
            name=name,
            method=method,
            status="purging",
            purged=0,
            attempts=1,
            workflow_id=workflow_id,
            run_id=run_id,
            started_at=now,
        )
        stmt = stmt.on_conflict_do_update(
            index_elements=[s.deletion_id, s.name],
            set_={"attempts": s.attempts + 1, "run_id": stmt.excluded.run_id, "workflow_id": stmt.excluded.workflow_id},
        )
        async with self.store.transaction() as conn:
            await conn.execute(stmt)

    async def sink_purged(self, did: str, name: str, purged: int) -> None:
        """How many items the last purge attempt removed (a retried attempt may find fewer)."""
        s = deletion_sinks.c
        async with self.store.transaction() as conn:
            await conn.execute(
                sa.update(deletion_sinks)
                .where(s.deletion_id == did, s.name == name, s.purged < purged)
                .values(purged=purged)
            )

    async def sink_checked(self, did: str, name: str, evidence: dict[str, Any], absent: bool, now: datetime) -> None:
        s = deletion_sinks.c
        values: dict[str, Any] = {"evidence": evidence, "status": "verified" if absent else "purging"}
        if absent:
            values["verified_at"] = now
        async with self.store.transaction() as conn:
            await conn.execute(
                sa.update(deletion_sinks)
                .where(s.deletion_id == did, s.name == name, s.status != "verified")
                .values(**values)
            )

    async def finish(
        self, tenant_id: str, did: str, *, receipt_hash: str, audit_event_id: str, counts: dict[str, Any], now: datetime
    ) -> bool:
        """Every sink verified: members become `purged` (expired ones stay `expired`, stamped purged_at).

        True only for the call that moved the deletion to `verified` (a retried finish gets False), so
        what happens once per deletion (its completion-time metric) can key on it.
        """
        m = memories.c
        d = deletions.c
        ids = await self.members(tenant_id, did)
        async with self.store.transaction() as conn:
            for chunk in _chunks(ids):
                await conn.execute(
                    sa.update(memories)
                    .where(m.tenant_id == tenant_id, m.id.in_(chunk), m.status == Status.TOMBSTONED.value)
                    .values(status=Status.PURGED.value, purged_at=now, updated_at=now, version=m.version + 1)
                )
                await conn.execute(
                    sa.update(memories)
                    .where(m.tenant_id == tenant_id, m.id.in_(chunk), m.purged_at.is_(None))
                    .values(purged_at=now, updated_at=now, version=m.version + 1)
                )
            finished = await conn.execute(
                sa.update(deletions)
                .where(d.tenant_id == tenant_id, d.id == did, d.status != "verified")
                .values(
                    status="verified",
                    completed_at=sa.func.coalesce(d.completed_at, now),
                    receipt_hash=receipt_hash,
                    audit_event_id=audit_event_id,
                    counts=counts,
                    updated_at=now,
                )
            )
        return finished.rowcount == 1

    # -- the store's own content (a sink) ------------------------------------------------------

    async def purge_content(self, tenant_id: str, ids: list[str]) -> int:
        """Drop content (and its hash) from these rows and any claim check still parked for them, and
        reduce each row to a tombstone (`memwarden.stores.tombstones`: no slot, no source_ref, provenance
        only its writer, the owner a pseudonym), in one transaction per chunk.
        """
        m = memories.c
        purged = 0
        pseudonyms = self.store._pseudonyms
        for chunk in _chunks(ids):
            async with self.store.transaction() as conn:
                result = await conn.execute(
                    sa.update(memories)
                    .where(
                        m.tenant_id == tenant_id,
                        m.id.in_(chunk),
                        sa.or_(m.content.is_not(None), m.content_hash != PURGED_HASH),
                    )
                    .values(content=None, content_hash=PURGED_HASH)
                )
                purged += result.rowcount
                await scrub(conn, tenant_id, chunk, pseudonyms)
                await conn.execute(sa.delete(candidates).where(candidates.c.ref.in_(chunk)))
        return purged

    async def scrub_purged(self) -> int:
        """Reduce rows purged before tombstones were scrubbed to tombstones too, and pseudonymize the
        requesters of older deletions; idempotent, so every worker runs it at start (a no-op once done).

        A pass in code, not an Alembic migration: the pseudonyms need the service's key, which a
        migration does not hold. Returns how many rows it changed.
        """
        m = memories.c
        d = deletions.c
        pseudonyms = self.store._pseudonyms
        changed = 0
        async with self.store.engine.connect() as conn:
            rows = (
                await conn.execute(
                    sa.select(m.tenant_id, m.id).where(
                        m.content.is_(None), m.purged_at.is_not(None), unscrubbed(pseudonyms)
                    )
                )
            ).all()
            requesters = (await conn.execute(sa.select(d.tenant_id, d.id, d.requester))).all()
        by_tenant: dict[str, list[str]] = {}
        for tenant_id, memory_id in rows:
            by_tenant.setdefault(tenant_id, []).append(memory_id)
        for tenant_id, ids in sorted(by_tenant.items()):
            for chunk in _chunks(ids):
                async with self.store.transaction() as conn:
                    changed += await scrub(conn, tenant_id, chunk, pseudonyms)
        for tenant_id, did, requester in requesters:
            stored = stored_requester(pseudonyms, tenant_id, requester)
            if stored != requester:
                async with self.store.transaction() as conn:
                    await conn.execute(sa.update(deletions).where(d.id == did).values(requester=stored))
                changed += 1
        return changed

    async def content_remaining(self, tenant_id: str, ids: list[str]) -> int:
        m = memories.c
        c = candidates.c
        left = 0
        leftover = unscrubbed(self.store._pseudonyms)  # a row that is more than a tombstone
        async with self.store.engine.connect() as conn:
            for chunk in _chunks(ids):
                left += int(
                    await conn.scalar(
                        sa.select(sa.func.count()).where(
                            m.tenant_id == tenant_id,
                            m.id.in_(chunk),
                            sa.or_(m.content.is_not(None), m.content_hash != PURGED_HASH, leftover),
                        )
                    )
                    or 0
                )
                left += int(await conn.scalar(sa.select(sa.func.count()).where(c.ref.in_(chunk))) or 0)
        return left

    async def compact(self, *, vacuum: bool = True) -> dict[str, Any]:
        """Make removed bytes unrecoverable where the engine allows it.

        SQLite (secure_delete is on for every connection, so freed cells and pages are zeroed): a
        TRUNCATE checkpoint copies the WAL into the database and empties it, so old page images
        holding the content are gone. `busy` > 0 means a reader held an old snapshot: not done yet.
        PostgreSQL: a plain VACUUM marks the dead row versions reusable; see the README on what it
        does not guarantee.
        """
        if self.store.dialect == "sqlite":
            wal = self.store.engine.url.database or ""
            busy, log = await asyncio.to_thread(_checkpoint, wal)
            wal_bytes = await asyncio.to_thread(_size, wal + "-wal")
            # busy == 0: the WAL was copied into the database file and reset, so no frame written
            # before the purge survives; frames written since (other sinks' bookkeeping) hold no content.
            return {
                "engine": "sqlite",
                "checkpoint_busy": busy,
                "wal_frames": log,
                "wal_bytes_after": wal_bytes,
                "complete": busy == 0,
            }
        if not vacuum:  # a read-back does not vacuum again: the purge did, or it failed and is retried
            return {"engine": "postgresql", "vacuum": "run_by_purge", "complete": True}
        async with self.store.engine.connect() as conn:
            auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await auto.execute(sa.text("VACUUM memories"))
            await auto.execute(sa.text("VACUUM candidates"))
        return {"engine": "postgresql", "vacuum": ["memories", "candidates"], "complete": True}


def _checkpoint(database: str) -> tuple[int, int]:
    """A TRUNCATE checkpoint on a connection of its own, run on a thread: (busy, WAL frames).

    It waits, up to the busy timeout, for readers still on an older snapshot, and those readers may
    be coroutines of this very event loop: run on the loop, it would stall them (and every request)
    until the timeout, and then report busy.
    """
    conn = sqlite3.connect(database, timeout=5.0, isolation_level=None)
    try:
        busy, log, _checkpointed = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    finally:
        conn.close()
    return int(busy), int(log)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _iso(value: datetime | None) -> str | None:
    return value.astimezone(UTC).isoformat() if value is not None else None


def build_receipt(row: DeletionRow, sinks: list[SinkRow], *, requester_hash: str) -> dict[str, Any]:
    """The receipt as hashed: only stored, settled values (a retry rebuilds the same bytes)."""
    completed = max((s.verified_at for s in sinks if s.verified_at is not None), default=row.created_at)
    role = row.requester.split(":", 1)[0]
    counts = dict(row.counts or {})
    counts["purged_by_sink"] = {s.name: s.purged for s in sinks}
    return {
        "deletion_id": row.id,
        "tenant_id": row.tenant_id,
        "request": {"reason": row.reason, "requester_role": role, "requester_hash": requester_hash},
        "selector": row.selector,
        "scope": row.selector.get("kind"),
        "subject_hash": row.subject_hash,
        "counts": counts,
        "workflow_id": row.workflow_id,
        "created_at": _iso(row.created_at),
        "completed_at": _iso(completed),
        "sinks": [
            {
                "name": s.name,
                "method": s.method,
                "status": s.status,
                "purged": s.purged,
                "attempts": s.attempts,
                "workflow_id": s.workflow_id,
                "run_id": s.run_id,
                "started_at": _iso(s.started_at),
                "verified_at": _iso(s.verified_at),
                "evidence": s.evidence,
            }
            for s in sorted(sinks, key=lambda s: s.name)
        ],
    }
