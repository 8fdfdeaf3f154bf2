"""RevalidateService without Temporal: a real HTTP system of record, real stores, the injected clock.

What the source says (unchanged, changed, gone) is applied with its audit event, stamped with the
service's clock and keyed by the run it was handed, or, with no workflow run, by an id from the
injected factory.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from memwarden.records import (
    Freshness,
    RevalidateInput,
    RevalidationOutcome,
    SourceRef,
    Status,
    content_hash,
)
from memwarden.services.deps import Deps
from memwarden.services.retrieve import RetrieveService
from memwarden.services.revalidate import ACTOR, RevalidateService, successor_id
from memwarden.services.run import standalone
from memwarden.stores.sources import SourceConfig
from tests.services_support import FIXED, RUN, Clock, Ids, audit_log, seed, service_deps, tenant
from tests.source_server import SourceServer
from tests.unit.test_services_retrieve import asking

_NS = uuid.UUID("7f3c2a61-0d4e-4f55-9a3b-2c8e1b6d5a90")
"""The revalidate events' id namespace, restated: an id the service derives differently fails the test."""
OLD = "synthetic: the office wifi network is called harbour-five"
NEW = "synthetic: the office wifi network is called harbour-six"


@pytest.fixture
def source() -> Iterator[SourceServer]:
    with SourceServer() as src:
        src.put("wifi", OLD, "v1")
        yield src


@pytest.fixture
async def deps(tmp_path: Path, source: SourceServer) -> AsyncIterator[Deps]:
    config = SourceConfig(name="crm", url=source.url, volatile=True, freshness_seconds=0, timeout_ms=2000)
    async with service_deps(tmp_path, sources=[config]) as opened:
        yield opened


async def backed(deps: Deps, t: str) -> str:
    record = await seed(
        deps, t, "alice", OLD, source=SourceRef(system="crm", key="wifi", version="v1"), at=FIXED - timedelta(days=1)
    )
    return record.id


def check(t: str, memory_id: str) -> RevalidateInput:
    return RevalidateInput(tenant_id=t, memory_id=memory_id, trigger="event")


async def test_an_unchanged_source_confirms_the_memory_at_the_injected_time(deps: Deps) -> None:
    t = tenant()
    memory_id = await backed(deps, t)
    result = await RevalidateService(deps).revalidate(check(t, memory_id), 1, RUN)
    assert (result.outcome, result.reason) == (RevalidationOutcome.UNCHANGED, "not_modified")

    row = await deps.store.get_memory(t, memory_id)
    assert row is not None and row.status is Status.ACTIVE and row.last_confirmed_at == FIXED
    [event] = await audit_log(deps, t)
    assert (event.operation, event.reason, event.actor, event.at) == ("revalidate", "unchanged", ACTOR, FIXED)
    assert event.namespace == "user:alice" and event.workflow_id == RUN.workflow_id
    assert event.id == str(uuid.uuid5(_NS, f"revalidate\x00wf-test\x00run-test\x00{memory_id}\x001"))
    assert event.details == {"trigger": "event", "answer": "not_modified", "attempt": 1, "source": "crm"}


async def test_a_changed_value_supersedes_with_a_successor_created_at_the_injected_time(
    deps: Deps, source: SourceServer
) -> None:
    t = tenant()
    memory_id = await backed(deps, t)
    source.put("wifi", NEW, "v2")
    result = await RevalidateService(deps).revalidate(check(t, memory_id), 1, RUN)

    old = await deps.store.get_memory(t, memory_id)
    assert old is not None and old.status is Status.SUPERSEDED
    assert result.outcome is RevalidationOutcome.CHANGED
    assert result.new_memory_id == successor_id(old, "v2", content_hash(NEW))
    new = await deps.store.get_memory(t, result.new_memory_id)
    assert new is not None and new.content == NEW and new.supersedes == memory_id
    assert new.created_at == new.last_confirmed_at == new.valid_from == FIXED
    assert new.source_ref is not None and new.source_ref.version == "v2"
    [event] = await audit_log(deps, t)
    assert (event.reason, event.at) == ("changed", FIXED)
    assert event.details["new_memory_id"] == new.id


async def test_a_deleted_record_invalidates_the_memory(deps: Deps, source: SourceServer) -> None:
    t = tenant()
    memory_id = await backed(deps, t)
    source.delete("wifi", 410)
    result = await RevalidateService(deps).revalidate(check(t, memory_id), 2, RUN)
    assert (result.outcome, result.attempts) == (RevalidationOutcome.GONE, 2)
    row = await deps.store.get_memory(t, memory_id)
    assert row is not None and row.status is Status.INVALIDATED
    [event] = await audit_log(deps, t)
    assert (event.reason, event.details["attempt"], event.at) == ("gone", 2, FIXED)


async def test_without_a_workflow_run_the_event_id_comes_from_the_injected_id_factory(deps: Deps) -> None:
    t = tenant()
    memory_id = await backed(deps, t)
    ids: Ids = deps.new_id  # type: ignore[assignment]
    await RevalidateService(deps).revalidate(check(t, memory_id), 1, standalone(deps.new_id))
    [event] = await audit_log(deps, t)
    assert ids.issued == ["id-1"]
    assert event.workflow_id is None
    assert event.id == str(uuid.uuid5(_NS, f"revalidate\x00None\x00id-1\x00{memory_id}\x001"))


async def test_memories_without_a_source_or_no_longer_live_are_skipped_with_nothing_written(deps: Deps) -> None:
    t = tenant()
    plain = await seed(deps, t, "alice", "synthetic: alice sits by the window")
    service = RevalidateService(deps)
    no_source = await service.revalidate(check(t, plain.id), 1, RUN)
    missing = await service.revalidate(check(t, "no-such-memory"), 1, RUN)
    assert (no_source.outcome, no_source.reason) == (RevalidationOutcome.SKIPPED, "no_source")
    assert (missing.outcome, missing.reason) == (RevalidationOutcome.SKIPPED, "not_live")
    assert await audit_log(deps, t) == []


async def test_the_periodic_plan_names_what_was_confirmed_before_half_a_sweep_on_the_injected_clock(
    deps: Deps,
) -> None:
    t = tenant()
    memory_id = await backed(deps, t)  # confirmed a day before the clock
    service = RevalidateService(deps)
    assert [(p.tenant_id, p.memory_id, p.trigger) for p in await service.periodic_plan()] == [
        (t, memory_id, "periodic")
    ]
    await service.revalidate(check(t, memory_id), 1, RUN)  # confirmed now
    assert await service.periodic_plan() == []
    clock: Clock = deps.clock  # type: ignore[assignment]
    clock.advance(seconds=deps.settings.revalidation_sweep_seconds)
    assert [p.memory_id for p in await service.periodic_plan()] == [memory_id]


async def test_a_read_checks_the_hit_at_its_source_and_answers_it_verified(deps: Deps) -> None:
    t = tenant()
    memory_id = await backed(deps, t)
    result = await RetrieveService(deps).search(asking(t, "alice", "what is the office wifi called"), RUN)
    assert [h.memory_id for h in result.hits] == [memory_id]
    assert [(c.memory_id, c.freshness) for c in result.checks] == [(memory_id, Freshness.VERIFIED)]
    row = await deps.store.get_memory(t, memory_id)
    assert row is not None and row.last_confirmed_at == FIXED
    [event] = await audit_log(deps, t)
    assert (event.reason, event.details["trigger"], event.at) == ("unchanged", "read_time", FIXED)
