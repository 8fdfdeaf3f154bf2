"""The Edge shard's group flush, and the catch-up from the store after a crash that lost unflushed writes.

A crash is simulated the honest way: the shard directory is copied while the live shard holds writes
it has not flushed, so the copy is what the disk holds at that instant; the copy is then opened as a
restarted worker would open it.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path

from memwarden.embed import MiniLMEmbedder, default_embedder
from memwarden.identity import Principal, Role, read_filter
from memwarden.records import IndexPoint, MemoryRecord, MemoryType, ReadFilter, Scope, SourceKind, Status, content_hash
from memwarden.services.indexing import reconcile_index
from memwarden.stores.sql import SqlStore
from memwarden.stores.vectors import index_point
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


@asynccontextmanager
async def as_after_a_crash(live: Path, copy: Path) -> AsyncIterator[EdgeIndex]:
    """Open a copy of `live` taken now: what a restarted worker finds on disk at this instant."""
    shutil.copytree(live, copy)
    restarted = EdgeIndex(copy)
    await restarted.ensure()
    try:
        yield restarted
    finally:
        await restarted.close()


def point_of(embedder: MiniLMEmbedder, r: MemoryRecord) -> IndexPoint:
    return index_point(r, embedder.embed([r.content or ""])[0])


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
        await live.upsert([point_of(embedder, durable)])
        await live.flush()
        flushed = live.flushed_through
        assert flushed is not None

        # After the flush: a new memory supersedes the old one (store first, then the index, unflushed).
        newer = record("synthetic: alice's bike is red", slot="bike.color")
        stored, superseded = await store.commit_live(newer)
        assert superseded == durable.id
        await live.upsert([point_of(embedder, stored)])
        await live.set_status([durable.id], Status.SUPERSEDED)
        # Visible to queries before any flush.
        assert await live.present([newer.id]) == [newer.id]

        async with as_after_a_crash(tmp_path / "index", tmp_path / "index-after-crash") as restarted:
            # The copy is what the disk held: the unflushed upsert is gone, the old value still looks live.
            assert await restarted.present([newer.id]) == []
            query = {"dense": embedder.embed(["alice bike"])[0], "read_filter": alice(), "limit": 5}
            now_ts = datetime.now(UTC).timestamp()
            assert [h.memory_id for h in await restarted.nearest(now_ts=now_ts, **query)] == [durable.id]

            since = restarted.flushed_through
            assert since is not None and since <= flushed
            assert await reconcile_index(store, restarted, embedder, since) >= 2
            # The new value is back, and the superseded one no longer passes the filter.
            assert [h.memory_id for h in await restarted.nearest(now_ts=now_ts, **query)] == [newer.id]
    finally:
        await live.close()
        await store.close()


async def test_a_deletion_is_on_disk_before_it_returns(tmp_path: Path) -> None:
    embedder = default_embedder()
    index = EdgeIndex(tmp_path / "index", flush_delay=3600)
    await index.ensure()
    try:
        gone = record("synthetic: alice's locker code is remembered elsewhere")
        await index.upsert([point_of(embedder, gone)])
        await index.flush()
        await index.delete([gone.id])
        async with as_after_a_crash(tmp_path / "index", tmp_path / "copy") as reopened:
            assert await reopened.present([gone.id]) == []
    finally:
        await index.close()


async def test_the_group_flush_runs_by_itself(tmp_path: Path) -> None:
    embedder = default_embedder()
    index = EdgeIndex(tmp_path / "index", flush_delay=0.05)
    await index.ensure()
    try:
        first = index.flushed_through
        kept = record("synthetic: alice waters the plants on sundays")
        await index.upsert([point_of(embedder, kept)])
        for _ in range(100):
            await asyncio.sleep(0.05)
            if index.flushed_through != first:
                break
        assert index.flushed_through is not None and first is not None and index.flushed_through > first
        async with as_after_a_crash(tmp_path / "index", tmp_path / "copy") as reopened:
            assert await reopened.present([kept.id]) == [kept.id]
    finally:
        await index.close()
