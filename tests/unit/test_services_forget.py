"""ForgetService, RetentionService and SummaryService without Temporal: a deletion's steps on real stores.

The steps the forget workflow runs (plan, purge and verify per sink, finish) are called in order by the
test; each stamps the injected clock, the purge records the run it was handed, and the receipt is
chained into the audit log once, at the time the last sink was verified.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from memwarden.errors import DeletionMissing
from memwarden.forget import MemorySelector, redacted, selector_key, subject_hash, subject_key
from memwarden.keys import Purpose
from memwarden.records import ForgetInput, MemoryType, SinkTask, Status
from memwarden.services.deps import Deps
from memwarden.services.forget import ForgetService
from memwarden.services.retention import REASON, REQUESTER, RetentionService
from memwarden.services.summaries import SummaryService
from memwarden.sinks import UnknownSink
from memwarden.stores.forget import DeletionRow, ForgetStore
from memwarden.stores.summaries import park_summary_request
from tests.services_support import FIXED, RUN, Clock, audit_log, seed, service_deps, tenant


@pytest.fixture
async def deps(tmp_path: Path) -> AsyncIterator[Deps]:
    async with service_deps(tmp_path) as opened:
        yield opened


async def begin(deps: Deps, t: str, memory_id: str) -> DeletionRow:
    """The deletion the API records before it starts ForgetWorkflow."""
    key = subject_key(deps.settings.auth_secret_value)
    selector = MemorySelector(memory_id=memory_id)
    body = redacted(selector, key, t)
    row, created = await ForgetStore(deps.store).begin(
        tenant_id=t,
        requester="user:alice",
        selector=selector,
        redacted_selector=body,
        selector_key=selector_key(t, body),
        reason="user_request",
        subject_hash=subject_hash(key, t, "alice"),
        now=deps.clock(),
    )
    assert created
    return row


async def test_a_deletion_runs_plan_purge_verify_finish_on_the_injected_clock(deps: Deps) -> None:
    t = tenant()
    memory = await seed(deps, t, "alice", "synthetic: alice's spare key is under the blue pot")
    row = await begin(deps, t, memory.id)
    clock: Clock = deps.clock  # type: ignore[assignment]
    service = ForgetService(deps)
    request = ForgetInput(deletion_id=row.id, tenant_id=t)
    forget = ForgetStore(deps.store)

    planned_at = clock.advance(minutes=1)
    plan = await service.plan(request)
    assert plan.members == 1 and plan.sinks == sorted(["cache", "store_content", "summaries", "vector_index"])
    planned = await forget.get(t, row.id)
    assert planned is not None and (planned.status, planned.updated_at) == ("purging", planned_at)

    purged_at = clock.advance(minutes=1)
    for sink in plan.sinks:
        await service.purge(SinkTask(deletion_id=row.id, tenant_id=t, sink=sink), RUN)
    verified_at = clock.advance(minutes=1)
    for sink in plan.sinks:
        evidence = await service.verify(SinkTask(deletion_id=row.id, tenant_id=t, sink=sink))
        assert evidence.absent, sink
    sinks = await forget.sinks(row.id)
    assert {(s.workflow_id, s.run_id, s.started_at, s.verified_at) for s in sinks} == {
        (RUN.workflow_id, RUN.run_id, purged_at, verified_at)
    }

    clock.advance(minutes=5)  # the receipt's time is the last verification's, not the finish's
    result = await service.finish(request)
    again = await service.finish(request)
    assert again.receipt_hash == result.receipt_hash
    receipts = [e for e in await audit_log(deps, t) if e.operation == "forget_receipt"]
    assert [(e.id, e.at, e.details["receipt_hash"]) for e in receipts] == [
        (f"forget-receipt-{row.id}", verified_at, result.receipt_hash)
    ]
    done = await forget.get(t, row.id)
    assert done is not None and (done.status, done.completed_at) == ("verified", verified_at)
    gone = await deps.store.get_memory(t, memory.id)
    assert gone is None or (gone.content is None and gone.status is Status.PURGED)


async def test_finishing_before_every_sink_is_verified_issues_no_receipt(deps: Deps) -> None:
    t = tenant()
    memory = await seed(deps, t, "alice", "synthetic: alice keeps receipts in the red folder")
    row = await begin(deps, t, memory.id)
    service = ForgetService(deps)
    await service.plan(ForgetInput(deletion_id=row.id, tenant_id=t))
    await service.purge(SinkTask(deletion_id=row.id, tenant_id=t, sink="cache"), RUN)
    with pytest.raises(RuntimeError, match="sinks not verified"):
        await service.finish(ForgetInput(deletion_id=row.id, tenant_id=t))
    assert [e for e in await audit_log(deps, t) if e.operation == "forget_receipt"] == []


async def test_an_unknown_deletion_or_sink_is_refused_by_its_type(deps: Deps) -> None:
    t = tenant()
    service = ForgetService(deps)
    with pytest.raises(DeletionMissing):
        await service.plan(ForgetInput(deletion_id="no-such-deletion", tenant_id=t))
    memory = await seed(deps, t, "alice", "synthetic: alice waters the fern on mondays")
    row = await begin(deps, t, memory.id)
    with pytest.raises(UnknownSink):
        await service.purge(SinkTask(deletion_id=row.id, tenant_id=t, sink="nowhere"), RUN)


async def test_retention_forgets_what_expired_by_the_injected_clock_with_its_request_event(deps: Deps) -> None:
    t = tenant()
    expiring = await seed(
        deps, t, "alice", "synthetic: alice's visitor pass is valid today", expires_at=FIXED + timedelta(hours=1)
    )
    service = RetentionService(deps)
    assert (await service.plan()).deletions == [], "not expired yet by the service's clock"

    clock: Clock = deps.clock  # type: ignore[assignment]
    swept_at = clock.advance(hours=2)
    plan = await service.plan()
    assert [d.tenant_id for d in plan.deletions] == [t]
    row = await ForgetStore(deps.store).get(t, plan.deletions[0].deletion_id)
    assert row is not None and row.created_at == swept_at
    assert await ForgetStore(deps.store).members(t, row.id) == [expiring.id]
    [event] = [e for e in await audit_log(deps, t) if e.operation == "forget_requested"]
    assert (event.id, event.actor, event.reason, event.at) == (f"forget-request-{row.id}", REQUESTER, REASON, swept_at)
    assert (await service.plan()).deletions == [], "the next sweep finds nothing new to forget"
    assert len([e for e in await audit_log(deps, t) if e.operation == "forget_requested"]) == 1


async def test_a_summary_is_derived_at_the_injected_time_and_audited_under_the_run(deps: Deps) -> None:
    t = tenant()
    episodes = [
        await seed(deps, t, "alice", f"synthetic: alice walked the {place} trail on saturday", type=MemoryType.EPISODIC)
        for place in ("river", "ridge")
    ]
    key = deps.settings.key_for(Purpose.SUBJECT_HANDLES)
    request = await park_summary_request(deps.store, key, tenant_id=t, owner_id="alice", actor="user:alice")
    clock: Clock = deps.clock  # type: ignore[assignment]
    derived_at = clock.advance(hours=1)

    result = await SummaryService(deps).summarize(request, RUN)
    assert result.summary_id is not None and result.derived_from == len(episodes)
    summary = await deps.store.get_memory(t, result.summary_id)
    assert summary is not None and summary.type is MemoryType.SUMMARY
    assert summary.created_at == summary.valid_from == derived_at
    [event] = [e for e in await audit_log(deps, t) if e.operation == "summarize"]
    assert (event.id, event.at, event.workflow_id) == (f"summary-{summary.id}", derived_at, RUN.workflow_id)
    assert (event.namespace, event.reason, event.details["derived_from"]) == ("user:alice", "derived_summary", 2)
