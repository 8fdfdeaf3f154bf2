"""Remediation's store on SQLite and PostgreSQL: quarantine, restore, revert, release and read history.

Real databases (a SQLite file; a PostgreSQL schema of its own): what the API and RollbackWorkflow rely
on, one transaction at a time, without the rest of the stack.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memwarden.records import MemoryRecord, MemoryType, Provenance, Scope, SourceKind, Status, content_hash
from memwarden.remediation import MemoriesSelector, WriterSelector, restored_id
from memwarden.stores.audit import read_event
from memwarden.stores.reads import read_history
from memwarden.stores.remediation import RemediationError, RemediationStore
from memwarden.stores.sql import SqlStore
from tests.conftest import service_url
from tests.store_support import fresh_store

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SqlStore]:
    if request.param == "postgresql":
        service_url("MEMWARDEN_TEST_POSTGRES_URL")
    async with fresh_store(request.param, tmp_path_factory.mktemp("remediation"), schema_prefix="mw_rem") as s:
        yield s


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def record(
    t: str, content: str, *, writer: str, at: datetime, slot: str | None = "seat", **fields: Any
) -> MemoryRecord:
    values: dict[str, Any] = {
        "id": str(uuid.uuid4()),
        "tenant_id": t,
        "owner_id": "team",
        "scope": Scope.SHARED,
        "store": "team",
        "type": MemoryType.FACT,
        "slot": slot,
        "content": content,
        "content_hash": content_hash(content),
        "source_kind": SourceKind.USER,
        "reason": "user_stated_fact",
        "provenance": Provenance(writer=writer),
        "status": Status.ACTIVE,
        "created_at": at,
        "updated_at": at,
    }
    return MemoryRecord(**(values | fields))


async def chain(store: SqlStore, t: str, *values: tuple[str, str]) -> list[MemoryRecord]:
    """Commit each (content, writer) into the slot in turn: each supersedes the one before."""
    rows = []
    for i, (content, writer) in enumerate(values):
        live, _ = await store.commit_live(record(t, content, writer=writer, at=NOW + timedelta(minutes=i)))
        rows.append(live)
    return rows


def writer_window(writer: str) -> WriterSelector:
    return WriterSelector(writer=writer, since=NOW - timedelta(hours=1), until=NOW + timedelta(hours=1))


async def test_a_writer_is_quarantined_at_once_and_its_predecessor_restored(store: SqlStore) -> None:
    t = tenant()
    good, bad_old, bad = await chain(
        store, t, ("window seat", "user:alice"), ("aisle seat", "agent:svc-a"), ("middle seat", "agent:svc-a")
    )
    other = await store.insert_memory(record(t, "tea", writer="agent:svc-b", at=NOW, slot=None))
    rem = RemediationStore(store)
    selector = writer_window("agent:svc-a")
    redacted = selector.model_dump(mode="json")
    row, created = await rem.quarantine(
        tenant_id=t, requester="operator:ops", selector=selector, redacted=redacted, reason="x", store=None, now=NOW
    )
    assert created and row.counts == {"quarantined": 1, "pending": 0}
    assert (await store.get_memory(t, bad.id)).status is Status.QUARANTINED  # type: ignore[union-attr]
    assert (await store.get_memory(t, other.id)).status is Status.ACTIVE  # type: ignore[union-attr]
    again, created = await rem.quarantine(
        tenant_id=t, requester="operator:ops", selector=selector, redacted=redacted, reason="x", store=None, now=NOW
    )
    assert (again.id, created) == (row.id, False)

    # The restore skips the writer's own earlier version in the chain: the value before both comes back.
    [brought] = await rem.restore(t, row.id, NOW)
    assert brought.outcome == "restored" and brought.live is not None
    assert (brought.live.content, brought.live.supersedes, brought.restored_from) == ("window seat", bad.id, good.id)
    assert brought.live.id == restored_id(row.id, bad.id)
    holder = await store.live_slot_holder(t, "team", "shared", None, "team", "seat")
    assert holder is not None and holder.id == brought.live.id
    assert await rem.restore(t, row.id, NOW) == []  # done once
    outcomes = {m["memory_id"]: m["outcome"] for m in await rem.members(t, row.id)}
    assert outcomes == {bad.id: "restored", bad_old.id: "not_in_use"}
    events, _ = await store.list_audit(t, operation="quarantine", limit=10, cursor=None)
    assert [e.memory_id for e in events] == [bad.id]


async def test_a_slot_that_moved_on_is_left_alone(store: SqlStore) -> None:
    t = tenant()
    _, bad = await chain(store, t, ("window seat", "user:alice"), ("aisle seat", "agent:svc-a"))
    rem = RemediationStore(store)
    selector = MemoriesSelector(memory_ids=[bad.id])
    row, _ = await rem.quarantine(
        tenant_id=t,
        requester="operator:ops",
        selector=selector,
        redacted=selector.model_dump(mode="json"),
        reason="x",
        store="team",
        now=NOW,
    )
    later, _ = await store.commit_live(record(t, "front seat", writer="user:alice", at=NOW + timedelta(hours=1)))
    [brought] = await rem.restore(t, row.id, NOW)
    assert (brought.outcome, brought.live) == ("slot_moved_on", None)
    holder = await store.live_slot_holder(t, "team", "shared", None, "team", "seat")
    assert holder is not None and holder.id == later.id

    # Released: its value is live again as a new version over the slot's holder; the quarantined row superseded.
    released = await rem.release(t, bad.id, "user:carol", "wf", NOW)
    assert released.live is not None and released.live.content == "aisle seat" and released.replaced == later.id
    assert (await store.get_memory(t, bad.id)).status is Status.SUPERSEDED  # type: ignore[union-attr]
    again = await rem.release(t, bad.id, "user:carol", "wf", NOW)
    assert again.live is not None and again.live.id == released.live.id


async def test_a_revert_is_one_new_version_and_refuses_what_it_cannot_undo(store: SqlStore) -> None:
    t = tenant()
    tea, coffee = await chain(store, t, ("tea", "user:alice"), ("coffee", "user:alice"))
    rem = RemediationStore(store)
    with pytest.raises(RemediationError) as refused:
        await rem.revert(t, tea.id, "user:alice", "wf", NOW)
    assert refused.value.code == "not_live"
    first = await rem.revert(t, coffee.id, "user:alice", "wf", NOW)
    second = await rem.revert(t, coffee.id, "user:alice", "wf", NOW)
    assert first.live is not None and second.live is not None and first.live.id == second.live.id
    assert (first.live.content, first.live.supersedes, second.restored_from) == ("tea", coffee.id, tea.id)
    reverted = await store.get_memory(t, coffee.id)
    assert reverted is not None and (reverted.status, reverted.superseded_by) == (Status.SUPERSEDED, first.live.id)
    lone = await store.insert_memory(record(t, "lone", writer="user:alice", at=NOW, slot=None))
    with pytest.raises(RemediationError) as nothing:
        await rem.revert(t, lone.id, "user:alice", "wf", NOW)
    assert nothing.value.code == "nothing_to_revert"


async def test_unknown_ids_are_named_by_position(store: SqlStore) -> None:
    t = tenant()
    known = await store.insert_memory(record(t, "x", writer="user:alice", at=NOW, slot=None))
    selector = MemoriesSelector(memory_ids=[known.id, str(uuid.uuid4())])
    with pytest.raises(RemediationError) as missing:
        await RemediationStore(store).quarantine(
            tenant_id=t,
            requester="operator:ops",
            selector=selector,
            redacted=selector.model_dump(mode="json"),
            reason="x",
            store=None,
            now=NOW,
        )
    assert (missing.value.code, missing.value.field, missing.value.index) == ("not_found", "selector.memory_ids", 1)
    assert (await store.get_memory(t, known.id)).status is Status.ACTIVE  # type: ignore[union-attr]


async def test_read_history_counts_searches_agents_and_sessions(store: SqlStore) -> None:
    t = tenant()
    a, b = str(uuid.uuid4()), str(uuid.uuid4())
    reads = [
        ("w1", [a, b], "planner", "s-1", "low"),
        ("w2", [b], "planner", "s-2", "high"),
        ("w3", [a], "writer", None, "low"),
        ("w4", [], "planner", "s-1", "low"),
    ]
    for workflow_id, returned, agent, session, consequence in reads:
        await store.append_audit(
            read_event(
                tenant_id=t,
                actor=f"agent:{agent}",
                workflow_id=f"{workflow_id}-{t}",
                returned=returned,
                withheld=[],
                consequence=consequence,
                agent=agent,
                session=session,
            )
        )
    one = await read_history(store, t, [a])
    assert (one.searches, one.sessions, one.agents) == (2, {"s-1": 1}, {"planner": 1, "writer": 1})
    both = await read_history(store, t, [a, b])
    assert (both.searches, both.high_consequence, both.sessions) == (3, 1, {"s-1": 1, "s-2": 1})
    assert (await read_history(store, tenant(), [a])).searches == 0
