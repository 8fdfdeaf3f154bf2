"""Forget, the service: plan the fan-out, purge one sink, verify one sink, issue the receipt.

Each step is one activity (`activities.forget` is the adapter, heartbeating the long ones); nothing
here knows Temporal. Each is idempotent: a purge retried after a crash finds less to remove; a verification only reads;
the receipt's audit event has a fixed id (appended once) and its hash is computed from stored rows
and verification times, so a retried `forget_finish` recomputes the very same hash. Inputs are the
deletion id and a sink name: the lineage is read from the store, never carried in history.
"""

from __future__ import annotations

from datetime import datetime

from memwarden import telemetry
from memwarden.errors import DeletionMissing
from memwarden.forget import receipt_hash, subject_key
from memwarden.records import ForgetInput, ForgetPlan, ForgetResult, SinkEvidence, SinkTask
from memwarden.services.deps import Deps
from memwarden.services.run import Run
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
from memwarden.stores.tombstones import requester_hash


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


class ForgetService:
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

    async def plan(self, request: ForgetInput) -> ForgetPlan:
        """Mark the deletion `purging` and name the sinks to fan out to (this worker's configuration)."""
        row = await self._deletion(request.tenant_id, request.deletion_id)
        await self.forget.set_status(row.tenant_id, row.id, "purging", self.deps.clock())
        members = await self.forget.members(row.tenant_id, row.id)
        return ForgetPlan(sinks=sorted(self.sinks), members=len(members))

    async def purge(self, task: SinkTask, run: Run) -> int:
        """Remove the deletion's lineage from one sink; a retry finds less to remove."""
        sink = self._sink(task.sink)
        row = await self._deletion(task.tenant_id, task.deletion_id)
        await self.forget.sink_started(
            row.id,
            sink.name,
            sink.method,
            workflow_id=run.workflow_id,
            run_id=run.run_id,
            now=self.deps.clock(),
        )
        removed = await sink.purge(await self._lineage(row))
        await self.forget.sink_purged(row.id, sink.name, removed)
        return removed

    async def verify(self, task: SinkTask) -> SinkEvidence:
        """Check one sink holds nothing of the lineage, and record its evidence."""
        sink = self._sink(task.sink)
        row = await self._deletion(task.tenant_id, task.deletion_id)
        evidence = await sink.verify_absent(await self._lineage(row))
        await self.forget.sink_checked(
            row.id, sink.name, evidence.model_dump(mode="json"), evidence.absent, self.deps.clock()
        )
        return evidence

    async def finish(self, request: ForgetInput) -> ForgetResult:
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
        return requester_hash(subject_key(self.deps.settings.auth_secret_value), row.tenant_id, row.requester)
