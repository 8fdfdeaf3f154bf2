"""One live value per slot: supersession in the durable store, on SQLite and PostgreSQL.

The concurrent test is the one that matters: many writers racing for one slot, each retrying on
`ConcurrencyConflict` as the commit activity does, must leave exactly one live value and a single
supersession chain holding every other write.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memwarden.records import MemoryRecord, Scope, Status
from memwarden.stores.sql import ConcurrencyConflict, SqlStore
from tests.integration.test_sql_store_contract import backend, fresh_store, make_record, tenant

__all__ = ["backend"]  # the fixture, re-used: sqlite always, postgresql when configured

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
async def store(backend: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SqlStore]:
    async with fresh_store(backend, tmp_path_factory.mktemp("slots")) as s:
        yield s


def slotted(t: str, content: str, **kw: Any) -> MemoryRecord:
    return make_record(t, content=content, slot="user.city", **kw)


async def test_new_value_supersedes_the_live_holder(store: SqlStore) -> None:
    t = tenant()
    first, sup1 = await store.commit_live(slotted(t, "lives in Paris"))
    second, sup2 = await store.commit_live(slotted(t, "lives in Lyon"))
    assert sup1 is None and sup2 == first.id
    old = await store.get_memory(t, first.id)
    assert old is not None and old.status is Status.SUPERSEDED and old.superseded_by == second.id
    assert second.supersedes == first.id and second.status is Status.ACTIVE
    holder = await store.live_slot_holder(t, "u1", "user", None, None, "user.city")
    assert holder is not None and holder.id == second.id


async def test_slots_are_per_namespace_and_slotless_memories_never_conflict(store: SqlStore) -> None:
    t = tenant()
    mine, _ = await store.commit_live(slotted(t, "lives in Paris"))
    other_owner, sup = await store.commit_live(slotted(t, "lives in Rome", owner_id="u2"))
    agent_scoped, sup2 = await store.commit_live(slotted(t, "lives in Oslo", scope=Scope.AGENT, agent_id="a1"))
    assert sup is None and sup2 is None
    a, _ = await store.commit_live(make_record(t, content="likes tea"))
    b, sup3 = await store.commit_live(make_record(t, content="likes jazz"))
    assert sup3 is None
    for rec in (mine, other_owner, agent_scoped, a, b):
        got = await store.get_memory(t, rec.id)
        assert got is not None and got.status is Status.ACTIVE


async def test_commit_is_idempotent_by_id_and_by_key(store: SqlStore) -> None:
    t = tenant()
    rec = slotted(t, "lives in Paris")
    first, _ = await store.commit_live(rec, idempotency_key="k1")
    again, _ = await store.commit_live(rec, idempotency_key="k1")
    other_id = rec.model_copy(update={"id": str(uuid.uuid4())})
    by_key, _ = await store.commit_live(other_id, idempotency_key="k1")
    assert first.id == again.id == by_key.id and again.version == first.version
    assert await store.get_memory(t, other_id.id) is None


async def test_pending_is_promoted_in_place_or_rejected_without_content(store: SqlStore) -> None:
    t = tenant()
    live, _ = await store.commit_live(slotted(t, "lives in Paris"))
    pending = await store.insert_memory(slotted(t, "lives in Lyon", status=Status.PENDING))
    assert (await store.live_slot_holder(t, "u1", "user", None, None, "user.city")).id == live.id  # type: ignore[union-attr]
    promoted, sup = await store.commit_live(pending.model_copy(update={"status": Status.ACTIVE}))
    assert promoted.id == pending.id and sup == live.id and promoted.version == pending.version + 1
    declined = await store.insert_memory(slotted(t, "lives in Nice", status=Status.PENDING))
    gone = await store.reject_pending(t, declined.id, NOW)
    assert gone is not None and gone.status is Status.REJECTED and gone.content is None
    assert (await store.reject_pending(t, declined.id, NOW)) == gone  # idempotent
    assert (await store.reject_pending(t, promoted.id, NOW)).status is Status.ACTIVE  # type: ignore[union-attr]


async def test_status_changes_free_or_take_the_slot(store: SqlStore) -> None:
    t = tenant()
    first, _ = await store.commit_live(slotted(t, "lives in Paris"))
    await store.set_status(t, first.id, Status.STALE, now=NOW)
    assert (await store.live_slot_holder(t, "u1", "user", None, None, "user.city")).id == first.id  # type: ignore[union-attr]
    await store.set_status(t, first.id, Status.INVALIDATED, now=NOW)
    assert await store.live_slot_holder(t, "u1", "user", None, None, "user.city") is None
    second, sup = await store.commit_live(slotted(t, "lives in Lyon"))
    assert sup is None and second.status is Status.ACTIVE


async def commit_with_retry(store: SqlStore, record: MemoryRecord) -> tuple[MemoryRecord, int]:
    """What the commit activity does under Temporal's retry policy, in miniature."""
    conflicts = 0
    while True:
        try:
            result, _ = await store.commit_live(record)
            return result, conflicts
        except ConcurrencyConflict:
            conflicts += 1
            await asyncio.sleep(0.001 * conflicts)


async def test_concurrent_writers_never_leave_two_live_values(backend: str, tmp_path: Path) -> None:
    if backend != "postgresql":
        pytest.skip("SQLite serialises writers; the race is real only on PostgreSQL")
    # A store of its own with a wide pool, so the writers really run in parallel transactions.
    async with fresh_store(backend, tmp_path) as store:
        t = tenant()
        writers = [slotted(t, f"lives in city {i}") for i in range(24)]
        results = await asyncio.gather(*(commit_with_retry(store, w) for w in writers))
        assert sum(c for _, c in results) > 0, "no writer ever collided: the test did not race"
        rows = [await store.get_memory(t, w.id) for w in writers]
        live = [r for r in rows if r is not None and r.status is Status.ACTIVE]
        assert len(live) == 1
        superseded = [r for r in rows if r is not None and r.status is Status.SUPERSEDED]
        assert len(superseded) == len(writers) - 1
        # one chain: following supersedes from the live value visits every write exactly once
        by_id = {r.id: r for r in rows if r is not None}
        seen, cursor = [], live[0]
        while cursor is not None:
            seen.append(cursor.id)
            cursor = by_id.get(cursor.supersedes) if cursor.supersedes else None
        assert sorted(seen) == sorted(w.id for w in writers)
