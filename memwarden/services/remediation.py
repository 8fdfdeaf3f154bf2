"""Remediation, the service: revert or release one memory, and a rollback's restore, sinks and receipt.

Each step is one activity (`activities.remediation` is the adapter, heartbeating the long ones);
nothing here knows Temporal, and every time it stamps is the injected clock's (`Deps.clock`). Over
`memwarden.stores.remediation` (the durable store's side) and the Forget sinks (`memwarden.sinks`),
which a rollback reuses: the quarantined writes' index points are deleted, the
cached searches they may have fed are dropped, every summary drawing on them is re-derived from what
remains, and each replica learns their status. Each activity is idempotent: the store's rows carry
fixed ids, every sink step finds less to do when retried, and the receipt is hashed from stored rows.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from memwarden import telemetry
from memwarden.forget import receipt_hash, subject_hash, subject_key
from memwarden.records import (
    LIVE_STATUSES,
    MemoryRecord,
    RevertInput,
    RevertResult,
    RollbackInput,
    RollbackPlan,
    RollbackResult,
    RollbackTask,
    SinkEvidence,
    Status,
)
from memwarden.remediation import build_rollback_receipt
from memwarden.services.deps import Deps
from memwarden.services.replicas import replicate
from memwarden.services.run import Run
from memwarden.sinks import CacheSink, Lineage, Sink, SummarySink, UnknownSink, VectorIndexSink
from memwarden.stores.audit import AuditEventIn
from memwarden.stores.cache import invalidation_prefixes
from memwarden.stores.reads import read_history
from memwarden.stores.remediation import Brought, RemediationError, RemediationStore, RollbackRow
from memwarden.stores.replicas import ReplicaStore
from memwarden.stores.vectors import index_point


class RollbackMissing(LookupError):
    """The workflow names a rollback the store does not hold (never retried into success: the rollback
    workflow lists it among its non-retryable error types)."""


class ReplicaStatusSink:
    """One replica: each quarantined memory's copy takes its current status (a replica read excludes it)."""

    method = "copy_status"

    def __init__(self, replica: ReplicaStore, deps: Deps) -> None:
        self.replica = replica
        self.deps = deps
        self.name = replica.name

    async def purge(self, lineage: Lineage) -> int:
        records = await self.deps.store.get_many(lineage.tenant_id, list(lineage.memory_ids))
        copied = 0
        for record in records.values():
            if record.content is not None:
                copied += await self.replica.copy(record)
        return copied

    async def verify_absent(self, lineage: Lineage) -> SinkEvidence:
        records = await self.deps.store.get_many(lineage.tenant_id, list(lineage.memory_ids))
        left = 0
        for memory_id, record in records.items():
            copy = await self.replica.get(memory_id)
            if (
                copy is not None
                and copy.get("status") in {s.value for s in LIVE_STATUSES}
                and record.status not in LIVE_STATUSES
            ):
                left += 1
        return SinkEvidence(
            sink=self.name,
            method="select_status",
            absent=left == 0,
            checked=len(lineage.memory_ids),
            remaining=left,
        )


def rollback_sinks(deps: Deps) -> dict[str, Sink]:
    """Every derivative a rollback must bring in line, by name (this worker's configuration)."""
    sinks: list[Sink] = [
        VectorIndexSink(deps.index),
        CacheSink(deps.cache),
        SummarySink(deps.store, deps.index, deps.embedder, deps.summarizer, deps.settings.max_content_chars),
    ]
    sinks += [ReplicaStatusSink(r, deps) for r in deps.replicas]
    return {s.name: s for s in sinks}


async def follow(deps: Deps, brought: Sequence[Brought], tenant_id: str) -> None:
    """The derivatives of what went live (or out of use): index, cache, replicas, in the commit's order."""
    lives = [b.live for b in brought if b.live is not None and b.live.content is not None]
    lives = [r for r in lives if r.status in LIVE_STATUSES]
    if lives:
        dense = await asyncio.to_thread(deps.embedder.embed, [r.content or "" for r in lives])
        await deps.index.upsert([index_point(r, d) for r, d in zip(lives, dense, strict=True)])
    changed = [i for b in brought for i in b.changed]
    if changed:
        current = await deps.store.get_many(tenant_id, changed)
        by_status: dict[Status, list[str]] = {}
        for record in current.values():
            by_status.setdefault(record.status, []).append(record.id)
        for status, ids in by_status.items():
            if status not in LIVE_STATUSES:
                await deps.index.set_status(ids, status)
    touched: list[MemoryRecord] = [*lives]
    prefixes = sorted({p for r in touched for p in invalidation_prefixes(r.tenant_id, r.scope, r.owner_id)})
    for prefix in prefixes:
        await deps.cache.delete_prefix(prefix)
    for memory_id in [*(r.id for r in lives), *changed]:
        await replicate(deps, tenant_id, memory_id)


class RemediationService:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.remediation = RemediationStore(deps.store)
        self.sinks = rollback_sinks(deps)

    async def _rollback(self, tenant_id: str, rid: str) -> RollbackRow:
        row = await self.remediation.get(tenant_id, rid)
        if row is None:
            raise RollbackMissing(rid)
        return row

    async def _lineage(self, row: RollbackRow) -> Lineage:
        members = await self.remediation.members(row.tenant_id, row.id)
        return Lineage(
            deletion_id=row.id,
            tenant_id=row.tenant_id,
            memory_ids=tuple(m["memory_id"] for m in members),
            cache_prefixes=tuple(row.cache_prefixes or ()),
        )

    def _sink(self, name: str) -> Sink:
        try:
            return self.sinks[name]
        except KeyError:
            raise UnknownSink(name) from None

    async def revert(self, request: RevertInput, run: Run) -> RevertResult:
        """Undo one supersession, or release one quarantined write; then its derivatives follow."""
        now = self.deps.clock()
        workflow_id = run.workflow_id or ""
        try:
            if request.action == "release":
                brought = await self.remediation.release(
                    request.tenant_id, request.memory_id, request.actor, workflow_id, now
                )
            else:
                brought = await self.remediation.revert(
                    request.tenant_id, request.memory_id, request.actor, workflow_id, now
                )
        except RemediationError as exc:
            return RevertResult(memory_id=None, reverted=request.memory_id, restored_from=None, outcome=exc.code)
        await follow(self.deps, [brought], request.tenant_id)
        return RevertResult(
            memory_id=brought.live.id if brought.live else None,
            reverted=brought.replaced or request.memory_id,
            restored_from=brought.restored_from,
            outcome=brought.outcome,
        )

    async def restore(self, request: RollbackInput) -> RollbackPlan:
        """Bring back each quarantined write's predecessor, index what went live, and name the sinks."""
        row = await self._rollback(request.tenant_id, request.rollback_id)
        now = self.deps.clock()
        await self.remediation.set_status(row.tenant_id, row.id, "restoring", now)
        await self.remediation.restore(row.tenant_id, row.id, now)
        members = await self.remediation.members(row.tenant_id, row.id)
        restored = [m["restored_id"] for m in members if m["restored_id"]]
        # Every restored row, not only this attempt's: a retry after a crash past the commit still indexes it.
        current = await self.deps.store.get_many(row.tenant_id, restored)
        brought = [Brought(current[i], None, None, "restored", ()) for i in restored if i in current]
        await follow(self.deps, brought, row.tenant_id)
        return RollbackPlan(sinks=sorted(self.sinks), members=len(members), restored=len(restored))

    async def apply(self, task: RollbackTask, run: Run) -> int:
        """Bring one derivative in line with the quarantine (idempotent: a retry finds less to do)."""
        sink = self._sink(task.sink)
        row = await self._rollback(task.tenant_id, task.rollback_id)
        await self.remediation.sink_started(
            row.id,
            sink.name,
            sink.method,
            workflow_id=run.workflow_id or "",
            run_id=run.run_id or "",
            now=self.deps.clock(),
        )
        applied = await sink.purge(await self._lineage(row))
        await self.remediation.sink_applied(row.id, sink.name, applied)
        return applied

    async def verify(self, task: RollbackTask) -> SinkEvidence:
        """Read the derivative back, independently of the apply: the receipt records evidence, not intent."""
        sink = self._sink(task.sink)
        row = await self._rollback(task.tenant_id, task.rollback_id)
        evidence = await sink.verify_absent(await self._lineage(row))
        await self.remediation.sink_checked(
            row.id, sink.name, evidence.model_dump(mode="json"), evidence.absent, self.deps.clock()
        )
        return evidence

    async def finish(self, request: RollbackInput) -> RollbackResult:
        """Every sink checked: count the blast radius, hash the receipt, chain it into the audit log."""
        row = await self._rollback(request.tenant_id, request.rollback_id)
        sinks = await self.remediation.sinks(row.id)
        unverified = [s["name"] for s in sinks if s["status"] != "verified" or s["verified_at"] is None]
        unverified += sorted(set(self.sinks) - {s["name"] for s in sinks})
        if unverified:
            raise RuntimeError(f"rollback {row.id}: sinks not verified: {unverified}")
        members = await self.remediation.members(row.tenant_id, row.id)
        reads = await read_history(self.deps.store, row.tenant_id, [m["memory_id"] for m in members])
        outcomes: dict[str, int] = {}
        for m in members:
            outcomes[m["outcome"] or "unknown"] = outcomes.get(m["outcome"] or "unknown", 0) + 1
        counts = {
            **(row.counts or {}),
            "restored": outcomes.get("restored", 0),
            "outcomes": dict(sorted(outcomes.items())),
            "reads": {
                "searches": reads.searches,
                "actors": len(reads.actors),
                "agents": len(reads.agents),
                "sessions": len(reads.sessions),
                "first_at": reads.first_at.isoformat() if reads.first_at else None,
                "last_at": reads.last_at.isoformat() if reads.last_at else None,
            },
        }
        completed = max(s["verified_at"] for s in sinks) if sinks else row.created_at
        receipt = build_rollback_receipt(
            row.model_dump() | {"counts": counts},
            sinks,
            requester_hash=subject_hash(
                subject_key(self.deps.settings.auth_secret_value), row.tenant_id, row.requester
            ),
            completed_at=completed,
        )
        digest = receipt_hash(receipt)
        event_id = f"rollback-receipt-{row.id}"
        await self.deps.store.append_audit(
            AuditEventIn(
                id=event_id,
                at=completed,
                tenant_id=row.tenant_id,
                actor="system:rollback",
                operation="rollback_receipt",
                reason=row.reason,
                workflow_id=row.workflow_id,
                details={
                    "rollback_id": row.id,
                    "receipt_hash": digest,
                    "counts": counts,
                    "sinks": [{"name": s["name"], "status": s["status"]} for s in receipt["sinks"]],
                },
            )
        )
        first = await self.remediation.finish(
            row.tenant_id, row.id, receipt_hash=digest, audit_event_id=event_id, counts=counts, now=completed
        )
        if first:  # once per rollback: the answers it had already influenced
            telemetry.metrics().record_influenced_answers(reads.searches, "quarantined_later")
        evidence = [SinkEvidence.model_validate(s["evidence"]) for s in sinks if s["evidence"]]
        return RollbackResult(rollback_id=row.id, receipt_hash=digest, sinks=evidence)
