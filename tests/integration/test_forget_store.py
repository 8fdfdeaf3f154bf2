"""Forget's repository on SQLite and PostgreSQL: every selector resolves to the right memories, at once.

`ForgetStore.begin` is what the API runs before its 202, so it is checked here on both dialects
(JSON paths for source records, chains, bulk tombstoning), together with idempotency and the rule
that a tombstoned memory never comes back through a commit.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from memwarden.forget import (
    AgentSelector,
    ExpiredSelector,
    MemorySelector,
    OwnerSelector,
    SlotSelector,
    SourceSelector,
    TenantSelector,
    redacted,
    selector_key,
    subject_key,
)
from memwarden.records import (
    MemoryRecord,
    MemoryType,
    Provenance,
    Scope,
    SourceKind,
    SourceRef,
    Status,
    content_hash,
)
from memwarden.stores.forget import ForgetStore, MemoryNotFound
from memwarden.stores.sql import SqlStore
from memwarden.stores.sql_models import memories
from tests.store_support import fresh_store

KEY = subject_key("store-test")


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SqlStore]:
    async with fresh_store(request.param, tmp_path_factory.mktemp("fs"), schema_prefix="mw_fs") as s:
        yield s


async def put(store: SqlStore, tenant: str, owner: str, text: str, **kw: object) -> MemoryRecord:
    at = datetime.now(UTC)
    values: dict[str, object] = {
        "id": str(uuid.uuid4()),
        "tenant_id": tenant,
        "owner_id": owner,
        "type": MemoryType.FACT,
        "content": text,
        "content_hash": content_hash(text),
        "source_kind": SourceKind.USER,
        "reason": "user_stated_fact",
        "created_at": at,
        "updated_at": at,
    }
    values.update(kw)
    live, _ = await store.commit_live(MemoryRecord(**values))  # type: ignore[arg-type]
    return live


async def forget(store: SqlStore, tenant: str, selector: object) -> tuple[set[str], str, bool]:
    body = redacted(selector, KEY, tenant)  # type: ignore[arg-type]
    row, created = await ForgetStore(store).begin(
        tenant_id=tenant,
        requester="privacy:dpo",
        selector=selector,
        redacted_selector=body,
        selector_key=selector_key(tenant, body),
        reason="test",
        subject_hash=body.get("subject_hash"),
        now=datetime.now(UTC),
    )
    return set(await ForgetStore(store).members(tenant, row.id)), row.id, created


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


async def test_each_selector_matches_exactly_its_memories(store: SqlStore) -> None:
    t = tenant()
    a1 = await put(store, t, "alice", "alice v1", slot="home.city")
    a2 = await put(store, t, "alice", "alice v2", slot="home.city")
    a3 = await put(store, t, "alice", "alice v3", slot="home.city")
    plain = await put(store, t, "alice", "alice likes figs")
    planner_a = await put(store, t, "alice", "planner on alice", scope=Scope.AGENT, agent_id="planner")
    planner_b = await put(store, t, "bob", "planner on bob", scope=Scope.AGENT, agent_id="planner")
    coach_a = await put(store, t, "alice", "coach on alice", scope=Scope.AGENT, agent_id="coach")
    crm = SourceRef(system="crm", key="rec-1", version="3")
    src_b = await put(store, t, "bob", "crm fact bob", source_ref=crm, source_kind=SourceKind.SYSTEM)
    src_c = await put(store, t, "carol", "crm fact carol", source_ref=crm, source_kind=SourceKind.SYSTEM)
    other = await put(store, t, "bob", "crm other", source_ref=SourceRef(system="crm", key="rec-2"))
    lapsed = await put(store, t, "dave", "dave's parcel", expires_at=datetime.now(UTC) - timedelta(seconds=1))

    # One memory: its whole chain, whichever version is named.
    members, _, _ = await forget(store, t, MemorySelector(memory_id=a2.id))
    assert members == {a1.id, a2.id, a3.id}
    for r in (a1, a2, a3):
        row = await store.get_memory(t, r.id)
        assert row is not None and row.status is Status.TOMBSTONED and row.tombstoned_at is not None
    assert await store.live_slot_holder(t, "alice", "user", None, None, "home.city") is None

    assert (await forget(store, t, AgentSelector(agent_id="planner", owner_id="bob")))[0] == {planner_b.id}
    assert (await forget(store, t, AgentSelector(agent_id="planner")))[0] == {planner_a.id}  # bob's already gone
    assert (await forget(store, t, SourceSelector(system="crm", key="rec-1")))[0] == {src_b.id, src_c.id}
    assert await ForgetStore(store).is_quarantined(t, "crm", "rec-1")
    assert not await ForgetStore(store).is_quarantined(t, "crm", "rec-2")
    members, _, _ = await forget(store, t, ExpiredSelector())
    assert members == {lapsed.id}
    assert (await store.get_memory(t, lapsed.id)).status is Status.EXPIRED  # type: ignore[union-attr]
    assert (await forget(store, t, OwnerSelector(owner_id="alice")))[0] == {plain.id, coach_a.id}
    # Offboarding takes all that still holds content, an expired-but-not-yet-purged memory included.
    assert (await forget(store, t, TenantSelector()))[0] == {other.id, lapsed.id}


async def test_slot_selector_and_idempotency(store: SqlStore) -> None:
    t = tenant()
    v1 = await put(store, t, "alice", "seat window", slot="travel.seat")
    v2 = await put(store, t, "alice", "seat aisle", slot="travel.seat")
    keep = await put(store, t, "alice", "bob's seat", slot="travel.seat", owner_id="bob")
    selector = SlotSelector(owner_id="alice", slot="travel.seat")
    first, did, created = await forget(store, t, selector)
    assert created and first == {v1.id, v2.id}
    again, did2, created2 = await forget(store, t, selector)
    assert (again, did2, created2) == (first, did, False)  # the same request, the same deletion
    assert (await store.get_memory(t, keep.id)).status is Status.ACTIVE  # type: ignore[union-attr]
    # A new value in the slot later is a new deletion of just that one.
    v3 = await put(store, t, "alice", "seat front", slot="travel.seat")
    third, did3, created3 = await forget(store, t, selector)
    assert created3 and did3 != did and third == {v3.id}
    # A retried commit of a tombstoned memory does not bring it back.
    again_live, _ = await store.commit_live(v2.model_copy(update={"status": Status.ACTIVE}))
    assert again_live.status is Status.TOMBSTONED


async def test_unknown_memory_and_another_tenants_memory_are_not_found(store: SqlStore) -> None:
    t = tenant()
    mine = await put(store, t, "alice", "alice's")
    with pytest.raises(MemoryNotFound):
        await forget(store, t, MemorySelector(memory_id=str(uuid.uuid4())))
    with pytest.raises(MemoryNotFound):
        await forget(store, tenant(), MemorySelector(memory_id=mine.id))
    members, _, _ = await forget(store, t, OwnerSelector(owner_id="nobody"))
    assert members == set()  # an erasure of someone with nothing held still gets a deletion (and a receipt)


async def test_content_purge_keeps_the_tombstone_row(store: SqlStore, tmp_path: Path) -> None:
    t = tenant()
    r = await put(store, t, "alice", "to be purged")
    members, _, _ = await forget(store, t, MemorySelector(memory_id=r.id))
    forget_store = ForgetStore(store)
    assert await forget_store.content_remaining(t, list(members)) == 1
    assert await forget_store.purge_content(t, list(members)) == 1
    assert await forget_store.purge_content(t, list(members)) == 0
    assert await forget_store.content_remaining(t, list(members)) == 0
    row = await store.get_memory(t, r.id)
    assert row is not None and row.content is None and row.content_hash == "" and row.owner_id == "alice"
    assert (await forget_store.compact())["complete"] is True


async def test_content_purge_takes_the_provenance_but_its_writer(store: SqlStore) -> None:
    """provenance.speaker can be a person's name, session and turn a conversation's: they go with the
    content (a tombstone keeps ids only), and are checked for like it."""
    t = tenant()
    spoken = Provenance(session="s", turn="D2:5", speaker="Nate")
    said = await put(store, t, "alice", "won the chess final", provenance=spoken)
    quiet = await put(store, t, "alice", "no speaker here", provenance=Provenance(session="s", turn="D2:6"))
    members, _, _ = await forget(store, t, OwnerSelector(owner_id="alice"))
    assert members == {said.id, quiet.id}
    forget_store = ForgetStore(store)
    assert await forget_store.purge_content(t, list(members)) == 2
    assert await forget_store.content_remaining(t, list(members)) == 0
    row = await store.get_memory(t, said.id)
    assert row is not None and row.provenance == Provenance()
    # A speaker left behind alone (content already gone) still counts as content remaining, and is purged.
    async with store.transaction() as conn:
        await conn.execute(
            sa.update(memories).where(memories.c.id == said.id).values(provenance={"session": "s", "speaker": "Nate"})
        )
    assert await forget_store.content_remaining(t, list(members)) == 1
    assert await forget_store.purge_content(t, list(members)) == 0  # no content was left to purge
    assert await forget_store.content_remaining(t, list(members)) == 0
    assert (await store.get_memory(t, said.id)).provenance == Provenance()  # type: ignore[union-attr]


async def test_identical_requests_racing_meet_on_one_deletion(store: SqlStore) -> None:
    import asyncio

    t = tenant()
    for i in range(20):
        await put(store, t, "erin", f"erin fact {i}")
    results = await asyncio.gather(*(forget(store, t, OwnerSelector(owner_id="erin")) for _ in range(4)))
    assert len({did for _, did, _ in results}) == 1
    assert sum(created for _, _, created in results) == 1
    assert all(len(members) == 20 for members, _, _ in results)


async def test_a_checkpoint_lets_a_reader_on_its_own_event_loop_finish(tmp_path: Path) -> None:
    """The purge's TRUNCATE checkpoint waits for readers still on a WAL snapshot, and such a reader is often a
    coroutine of the same event loop (an API request, another sink's read-back). The checkpoint has to wait
    off the loop: on it, neither could move until the busy timeout, and the checkpoint would report busy."""
    import asyncio
    import time

    async with fresh_store("sqlite", tmp_path) as sqlite_store:
        await put(sqlite_store, tenant(), "alice", "a row, so the WAL holds frames")
        async with sqlite_store.engine.connect() as reader:
            await reader.begin()
            assert await reader.scalar(sa.select(sa.func.count()).select_from(memories)) == 1  # a snapshot held
            started = time.monotonic()
            checkpoint = asyncio.create_task(ForgetStore(sqlite_store).compact())
            await asyncio.sleep(0.1)  # the reader finishes its work a moment later, as a request would
            await reader.rollback()
        compaction = await asyncio.wait_for(checkpoint, 10)
        waited = time.monotonic() - started
    assert compaction["complete"] is True and compaction["checkpoint_busy"] == 0, compaction
    assert waited < 2.5, f"the checkpoint waited {waited:.1f}s: the busy timeout, not the reader"
