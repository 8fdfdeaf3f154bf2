"""Forget's activities: plan the fan-out, purge one sink, verify one sink, issue the receipt.

Each is idempotent: a purge retried after a crash finds less to remove; a verification only reads;
the receipt's audit event has a fixed id (appended once) and its hash is computed from stored rows
and verification times, so a retried `forget_finish` recomputes the very same hash. Inputs are the
deletion id and a sink name: the lineage is read from the store, never carried in history.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime

from temporalio import activity

from memwarden import telemetry
from memwarden.forget import receipt_hash, subject_hash, subject_key
from memwarden.records import ForgetInput, ForgetPlan, ForgetResult, SinkEvidence, SinkTask
from memwarden.services.deps import Deps
from memwarden.sinks import (
    CacheSink,
    Lineage,
    ReplicaSink,
    Sink,
    StoreContentSink,
    SummarySink,
    UnknownSink,
    VectorIndexSink,
)
from memwarden.stores.audit import AuditEventIn
from memwarden.stores.forget import DeletionRow, ForgetStore, build_receipt
from memwarden.temporal.names import FORGET_FINISH, FORGET_PLAN, FORGET_PURGE, FORGET_VERIFY

HEARTBEAT_SECONDS = 2.0


class DeletionMissing(LookupError):
    """The workflow names a deletion the store does not hold (never retried into success)."""


@contextlib.asynccontextmanager
async def heartbeating() -> AsyncIterator[None]:
    """Heartbeat while a long purge runs, so a killed worker is noticed in seconds, not at the timeout."""

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(HEARTBEAT_SECONDS)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def build_sinks(deps: Deps) -> dict[str, Sink]:
    """Every sink this worker is configured with, by name."""
    sinks: list[Sink] = [
        VectorIndexSink(deps.index),
        CacheSink(deps.cache),
        SummarySink(deps.store, deps.index, deps.embedder, deps.summarizer, deps.settings.max_content_chars),
        StoreContentSink(deps.store),
    ]
    sinks += [ReplicaSink(r) for r in deps.replicas]
    return {s.name: s for s in sinks}


class ForgetActivities:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.forget = ForgetStore(deps.store)
        self.sinks = build_sinks(deps)

    async def _deletion(self, tenant_id: str, deletion_id: str) -> DeletionRow:
        row = await self.forget.get(tenant_id, deletion_id)
        if row is None:
            raise DeletionMissing(deletion_id)
        return row

    async def _lineage(self, row: DeletionRow) -> Lineage:
        ids = await self.forget.members(row.tenant_id, row.id)
        return Lineage(
            deletion_id=row.id,
            tenant_id=row.tenant_id,
            memory_ids=tuple(ids),
            cache_prefixes=tuple(row.cache_prefixes or ()),
        )

    def _sink(self, name: str) -> Sink:
        try:
            return self.sinks[name]
        except KeyError:
            raise UnknownSink(name) from None

    @activity.defn(name=FORGET_PLAN)
    async def forget_plan(self, request: ForgetInput) -> ForgetPlan:
        """Mark the deletion `purging` and name the sinks to fan out to (this worker's configuration)."""
        row = await self._deletion(request.tenant_id, request.deletion_id)
        await self.forget.set_status(row.tenant_id, row.id, "purging", datetime.now(UTC))
        members = await self.forget.members(row.tenant_id, row.id)
        return ForgetPlan(sinks=sorted(self.sinks), members=len(members))

    @activity.defn(name=FORGET_PURGE)
    async def forget_purge(self, task: SinkTask) -> int:
        sink = self._sink(task.sink)
        row = await self._deletion(task.tenant_id, task.deletion_id)
        info = activity.info()
        await self.forget.sink_started(
            row.id,
            sink.name,
            sink.method,
            workflow_id=info.workflow_id,
            run_id=info.workflow_run_id,
            now=datetime.now(UTC),
        )
        async with heartbeating():
            removed = await sink.purge(await self._lineage(row))
        await self.forget.sink_purged(row.id, sink.name, removed)
        return removed

    @activity.defn(name=FORGET_VERIFY)
    async def forget_verify(self, task: SinkTask) -> SinkEvidence:
        sink = self._sink(task.sink)
        row = await self._deletion(task.tenant_id, task.deletion_id)
        async with heartbeating():
            evidence = await sink.verify_absent(await self._lineage(row))
        await self.forget.sink_checked(
            row.id, sink.name, evidence.model_dump(mode="json"), evidence.absent, datetime.now(UTC)
        )
        return evidence

    @activity.defn(name=FORGET_FINISH)
    async def forget_finish(self, request: ForgetInput) -> ForgetResult:
        """Every sink verified: build the receipt, chain it into the audit log, mark members purged."""
        row = await self._deletion(request.tenant_id, request.deletion_id)
        sinks = await self.forget.sinks(row.id)
        unverified = [s.name for s in sinks if s.status != "verified" or s.verified_at is None]
        unverified += sorted(set(self.sinks) - {s.name for s in sinks})
        if unverified:
            raise RuntimeError(f"deletion {row.id}: sinks not verified: {unverified}")
        receipt = build_receipt(row, sinks, requester_hash=self._requester_hash(row))
        digest = receipt_hash(receipt)
        event_id = f"forget-receipt-{row.id}"
        await self.deps.store.append_audit(
            AuditEventIn(
                id=event_id,
                at=datetime.fromisoformat(receipt["completed_at"]),
                tenant_id=row.tenant_id,
                actor="system:forget",
                operation="forget_receipt",
                reason=row.reason,
                workflow_id=row.workflow_id,
                deletion_id=row.id,
                details={
                    "receipt_hash": digest,
                    "subject_hash": row.subject_hash,
                    "counts": receipt["counts"],
                    "sinks": [{"name": s["name"], "status": s["status"]} for s in receipt["sinks"]],
                },
            )
        )
        completed = datetime.fromisoformat(receipt["completed_at"])
        first = await self.forget.finish(
            row.tenant_id,
            row.id,
            receipt_hash=digest,
            audit_event_id=event_id,
            counts=receipt["counts"],
            now=completed,
        )
        if first:  # once per deletion: a retried finish finds it verified already
            seconds = max((completed - row.created_at).total_seconds(), 0.0)
            telemetry.metrics().record_deletion(seconds, "verified", scope=str(row.selector.get("kind") or ""))
        evidence = [SinkEvidence.model_validate(s.evidence) for s in sinks if s.evidence]
        return ForgetResult(deletion_id=row.id, receipt_hash=digest, sinks=evidence)

    def _requester_hash(self, row: DeletionRow) -> str:
        return subject_hash(subject_key(self.deps.settings.auth_secret_value), row.tenant_id, row.requester)

    def all(self) -> list[object]:
        return [self.forget_plan, self.forget_purge, self.forget_verify, self.forget_finish]
