"""RemediationService without Temporal: a revert and a rollback's steps on real stores, a fixed clock.

The steps RollbackWorkflow runs (restore, apply and verify per sink, finish) are called in order by
the test; each stamps the injected clock, the apply records the run it was handed, and the receipt is
chained into the audit log once, at the time the last sink was checked.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memwarden.forget import receipt_hash, subject_hash, subject_key
from memwarden.records import (
    MemoryRecord,
    MemoryType,
    RevertInput,
    RollbackInput,
    RollbackTask,
    Scope,
    SourceKind,
    Status,
    content_hash,
)
from memwarden.remediation import MemoriesSelector, build_rollback_receipt
from memwarden.services.deps import Deps
from memwarden.services.remediation import RemediationService, RollbackMissing
from memwarden.stores.remediation import RemediationStore
from memwarden.stores.replicas import ReplicaStore
from memwarden.stores.vectors import index_point
from tests.services_support import FIXED, RUN, Clock, audit_log, service_deps, tenant


@pytest.fixture
async def deps(tmp_path: Path) -> AsyncIterator[Deps]:
    async with service_deps(tmp_path) as opened:
        yield opened


async def commit(deps: Deps, t: str, content: str, writer: str) -> MemoryRecord:
    """A live value of alice's `music` slot, committed and indexed as the commit path does it."""
    now = deps.clock()
    record = MemoryRecord(
        id=str(uuid.uuid4()),
        tenant_id=t,
        owner_id="alice",
        scope=Scope.USER,
        type=MemoryType.PREFERENCE,
        slot="music",
        content=content,
        content_hash=content_hash(content),
        source_kind=SourceKind.USER,
        reason="user_explicit_preference",
        provenance={"writer": writer},  # type: ignore[arg-type]
        status=Status.ACTIVE,
        created_at=now,
        updated_at=now,
    )
    live, _ = await deps.store.commit_live(record)
    [dense] = await asyncio.to_thread(deps.embedder.embed, [content])
    await deps.index.upsert([index_point(live, dense)])
    return live


async def test_a_revert_stamps_the_clock_and_names_its_run(deps: Deps) -> None:
    t = tenant()
    jazz = await commit(deps, t, "likes jazz while working", "user:alice")
    assert isinstance(deps.clock, Clock)
    deps.clock.advance(minutes=5)
    rock = await commit(deps, t, "likes rock while working", "user:alice")
    deps.clock.advance(minutes=5)
    service = RemediationService(deps)
    result = await service.revert(RevertInput(tenant_id=t, memory_id=rock.id, actor="user:alice"), RUN)
    assert (result.outcome, result.reverted, result.restored_from) == ("reverted", rock.id, jazz.id)
    restored = await deps.store.get_memory(t, result.memory_id or "")
    assert restored is not None and restored.content == jazz.content and restored.created_at == deps.clock()
    assert await deps.index.present([restored.id]) == [restored.id]
    [event] = [e for e in await audit_log(deps, t) if e.operation == "revert"]
    assert (event.at, event.workflow_id, event.memory_id) == (deps.clock(), RUN.workflow_id, restored.id)
    refused = await service.revert(RevertInput(tenant_id=t, memory_id=jazz.id, actor="user:alice"), RUN)
    assert (refused.memory_id, refused.outcome) == (None, "not_live")


async def test_a_rollback_restores_applies_verifies_and_chains_one_receipt(deps: Deps) -> None:
    t = tenant()
    good = await commit(deps, t, "likes jazz while working", "user:alice")
    assert isinstance(deps.clock, Clock)
    deps.clock.advance(minutes=1)
    bad = await commit(deps, t, "likes silence while working", "agent:svc-a")
    selector = MemoriesSelector(memory_ids=[bad.id])
    row, _ = await RemediationStore(deps.store).quarantine(
        tenant_id=t,
        requester="operator:ops",
        selector=selector,
        redacted=selector.model_dump(mode="json"),
        reason="poisoned_agent",
        store=None,
        now=deps.clock(),
    )
    service = RemediationService(deps)
    request = RollbackInput(rollback_id=row.id, tenant_id=t)
    deps.clock.advance(seconds=10)
    plan = await service.restore(request)
    assert plan.restored == 1 and {"vector_index", "cache", "summaries"} <= set(plan.sinks)
    holder = await deps.store.live_slot_holder(t, "alice", "user", None, None, "music")
    assert holder is not None and holder.content == good.content and holder.created_at == deps.clock()
    for name in plan.sinks:
        task = RollbackTask(rollback_id=row.id, tenant_id=t, sink=name)
        await service.apply(task, RUN)
        deps.clock.advance(seconds=1)
        evidence = await service.verify(task)
        assert evidence.absent, evidence
    checked = deps.clock()
    assert await deps.index.present([bad.id]) == []
    sinks = await RemediationStore(deps.store).sinks(row.id)
    assert {s["run_id"] for s in sinks} == {RUN.run_id}
    result = await service.finish(request)
    again = await service.finish(request)
    assert result.receipt_hash == again.receipt_hash
    receipts = [e for e in await audit_log(deps, t) if e.operation == "rollback_receipt"]
    assert len(receipts) == 1 and receipts[0].at == checked
    assert receipts[0].details["receipt_hash"] == result.receipt_hash
    stored = await RemediationStore(deps.store).get(t, row.id)
    assert stored is not None and stored.status == "verified" and stored.completed_at == checked
    assert stored.counts and stored.counts["restored"] == 1 and stored.counts["reads"]["searches"] == 0
    # The receipt is rebuilt from the stored rows alone (what GET /v1/rollbacks/{id} shows) to the same hash.
    requester = subject_hash(subject_key(deps.settings.auth_secret_value), t, "operator:ops")
    rebuilt = build_rollback_receipt(
        stored.model_dump(),
        await RemediationStore(deps.store).sinks(row.id),
        requester_hash=requester,
        completed_at=checked,
    )
    assert receipt_hash(rebuilt) == result.receipt_hash and FIXED < checked


async def test_an_unknown_rollback_is_never_retried_into_success(deps: Deps) -> None:
    with pytest.raises(RollbackMissing):
        await RemediationService(deps).restore(RollbackInput(rollback_id="nope", tenant_id=tenant()))


async def test_a_replica_learns_the_quarantine_and_the_restored_value(deps: Deps, tmp_path: Path) -> None:
    t = tenant()
    replica = await ReplicaStore.open(f"sqlite+aiosqlite:///{tmp_path / 'replica.db'}")
    deps.replicas.append(replica)
    try:
        await commit(deps, t, "likes jazz while working", "user:alice")
        assert isinstance(deps.clock, Clock)
        deps.clock.advance(minutes=1)
        bad = await commit(deps, t, "likes silence while working", "agent:svc-a")
        assert await replica.copy(bad)
        selector = MemoriesSelector(memory_ids=[bad.id])
        row, _ = await RemediationStore(deps.store).quarantine(
            tenant_id=t,
            requester="operator:ops",
            selector=selector,
            redacted=selector.model_dump(mode="json"),
            reason="poisoned_agent",
            store=None,
            now=deps.clock(),
        )
        service = RemediationService(deps)
        plan = await service.restore(RollbackInput(rollback_id=row.id, tenant_id=t))
        task = RollbackTask(rollback_id=row.id, tenant_id=t, sink=replica.name)
        assert replica.name in plan.sinks
        before = await service.verify(task)
        assert not before.absent and before.remaining == 1  # the copy still serves the bad value
        await service.apply(task, RUN)
        assert (await service.verify(task)).absent
        copy = await replica.get(bad.id)
        assert copy is not None and copy["status"] == "quarantined"
        [member] = await RemediationStore(deps.store).members(t, row.id)
        restored = await replica.get(member["restored_id"])
        assert restored is not None and restored["status"] == "active"
    finally:
        await replica.close()
