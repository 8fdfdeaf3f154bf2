"""The Edge shard's group flush, and the catch-up from the store after a crash that lost unflushed writes.

A crash is simulated the honest way: the shard directory is copied while the live shard holds writes
it has not flushed, so the copy is what the disk holds at that instant; the copy is then opened as a
restarted worker would open it.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from datetime import UTC, datetime
from pathlib import Path

from activities.indexing import index_point, reconcile_index
from memwarden.embed import default_embedder
from memwarden.identity import Principal, Role, read_filter
from memwarden.records import MemoryRecord, MemoryType, ReadFilter, Scope, SourceKind, Status, content_hash
from memwarden.stores.sql import SqlStore
from memwarden.stores.vectors_edge import EdgeIndex

T = "t-flush"


def record(text: str, slot: str | None = None) -> MemoryRecord:
    now = datetime.now(UTC)
    return MemoryRecord(
        id=str(uuid.uuid4()),
        tenant_id=T,
        owner_id="alice",
        scope=Scope.USER,
        type=MemoryType.FACT,
        slot=slot,
        content=text,
        content_hash=content_hash(text),
        source_kind=SourceKind.USER,
        reason="user_stated_fact",
        created_at=now,
        updated_at=now,
    )


def alice() -> ReadFilter:
    return read_filter(Principal(tenant=T, sub="alice", role=Role.USER))


async def test_unflushed_writes_are_visible_at_once_and_repaired_after_a_crash(tmp_path: Path) -> None:
    embedder = default_embedder()
    store = await SqlStore.open(f"sqlite+aiosqlite:///{tmp_path / 'm.db'}")
    await store.migrate()
    live = EdgeIndex(tmp_path / "index", flush_delay=3600)  # no group flush during the test
    await live.ensure()
    try:
        durable = record("synthetic: alice's bike is green", slot="bike.color")
        await store.insert_memory(durable)
        await live.upsert([index_point(durable, embedder.embed([durable.content or ""])[0])])
        await live.flush()
        flushed = live.flushed_through
        assert flushed is not None

        # After the flush: a new memory supersedes the old one (store first, then the index, unflushed).
        newer = record("synthetic: alice's bike is red", slot="bike.color")
        stored, superseded = await store.commit_live(newer)
        assert superseded == durable.id
        await live.upsert([index_point(stored, embedder.embed([newer.content or ""])[0])])
        await live.set_status([durable.id], Status.SUPERSEDED)
        # Visible to queries before any flush.
        assert await live.present([newer.id]) == [newer.id]

        crashed = tmp_path / "index-after-crash"
        shutil.copytree(tmp_path / "index", crashed)
    finally:
        await live.close()

    restarted = EdgeIndex(crashed)
    await restarted.ensure()
    try:
        # The copy is what the disk held: the unflushed upsert is gone, the old value still looks live.
        assert await restarted.present([newer.id]) == []
        now_ts = datetime.now(UTC).timestamp()
        before = await restarted.nearest(
            dense=embedder.embed(["alice bike"])[0], read_filter=alice(), now_ts=now_ts, limit=5
        )
        assert [h.memory_id for h in before] == [durable.id]

        since = restarted.flushed_through
        assert since is not None and since <= flushed
        touched = await reconcile_index(store, restarted, embedder, since)
        assert touched >= 2
        after = await restarted.nearest(
            dense=embedder.embed(["alice bike"])[0], read_filter=alice(), now_ts=now_ts, limit=5
        )
        assert [h.memory_id for h in after] == [newer.id]  # the superseded value no longer passes the filter
    finally:
        await restarted.close()
        await store.close()


async def test_a_deletion_is_on_disk_before_it_returns(tmp_path: Path) -> None:
    embedder = default_embedder()
    index = EdgeIndex(tmp_path / "index", flush_delay=3600)
    await index.ensure()
    try:
        gone = record("synthetic: alice's locker code is remembered elsewhere")
        await index.upsert([index_point(gone, embedder.embed([gone.content or ""])[0])])
        await index.flush()
        await index.delete([gone.id])
        copy = tmp_path / "copy"
        shutil.copytree(tmp_path / "index", copy)
    finally:
        await index.close()
    reopened = EdgeIndex(copy)
    await reopened.ensure()
    try:
        assert await reopened.present([gone.id]) == []
    finally:
        await reopened.close()


async def test_the_group_flush_runs_by_itself(tmp_path: Path) -> None:
    embedder = default_embedder()
    index = EdgeIndex(tmp_path / "index", flush_delay=0.05)
    await index.ensure()
    try:
        first = index.flushed_through
        kept = record("synthetic: alice waters the plants on sundays")
        await index.upsert([index_point(kept, embedder.embed([kept.content or ""])[0])])
        for _ in range(100):
            await asyncio.sleep(0.05)
            if index.flushed_through != first:
                break
        assert index.flushed_through is not None and first is not None and index.flushed_through > first
        copy = tmp_path / "copy"
        shutil.copytree(tmp_path / "index", copy)
    finally:
        await index.close()
    reopened = EdgeIndex(copy)
    await reopened.ensure()
    try:
        assert await reopened.present([kept.id]) == [kept.id]
    finally:
        await reopened.close()
