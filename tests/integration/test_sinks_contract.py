"""One contract for every Forget sink, on every backend it supports.

Vector index: Qdrant Edge and qdrant-client (local mode stands in for the server). Cache: in-process
and Redis. Durable store: SQLite and PostgreSQL (a fresh schema). Replica: a SQLite file and a second
PostgreSQL *database* (created for the module, dropped after). For each: the read-back is honest
(it reports what is still there before the purge), a purge leaves the read-back absent, a second
purge finds nothing and changes nothing, and data outside the lineage is untouched.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from memwarden.embed import default_embedder
from memwarden.records import IndexPoint, MemoryRecord, MemoryType, Scope, SourceKind, Status, content_hash
from memwarden.sinks import CacheSink, Lineage, ReplicaSink, Sink, StoreContentSink, SummarySink, VectorIndexSink
from memwarden.stores.cache import Cache, MemoryCache, RedisCache, owner_prefix, search_key
from memwarden.stores.replicas import ReplicaStore
from memwarden.stores.sql import SqlStore
from memwarden.stores.summaries import ExtractiveSummarizer, derive
from memwarden.stores.vectors import DENSE_DIM, VectorIndex
from memwarden.stores.vectors_edge import EdgeIndex
from tests.conftest import service_url
from tests.store_support import fresh_store


def now() -> datetime:
    return datetime.now(UTC)


def record(tenant: str, owner: str, text: str, **kw: object) -> MemoryRecord:
    at = now()
    values: dict[str, object] = {
        "id": str(uuid.uuid4()),
        "tenant_id": tenant,
        "owner_id": owner,
        "scope": Scope.USER,
        "type": MemoryType.FACT,
        "content": text,
        "content_hash": content_hash(text),
        "source_kind": SourceKind.USER,
        "reason": "user_stated_fact",
        "created_at": at,
        "updated_at": at,
    }
    values.update(kw)
    return MemoryRecord(**values)  # type: ignore[arg-type]


def lineage(tenant: str, ids: list[str], prefixes: list[str] | None = None) -> Lineage:
    return Lineage(
        deletion_id=str(uuid.uuid4()), tenant_id=tenant, memory_ids=tuple(ids), cache_prefixes=tuple(prefixes or ())
    )


async def check_contract(sink: Sink, doomed: Lineage) -> None:
    before = await sink.verify_absent(doomed)
    assert not before.absent and before.remaining > 0, before
    assert await sink.purge(doomed) > 0
    after = await sink.verify_absent(doomed)
    assert after.absent and after.remaining == 0 and after.sink == sink.name, after
    assert await sink.purge(doomed) == 0  # idempotent: a retried activity finds nothing more
    assert (await sink.verify_absent(doomed)).absent


# -- backends ----------------------------------------------------------------------------------


@pytest.fixture(params=["memory", pytest.param("redis", marks=pytest.mark.redis)])
async def cache(request: pytest.FixtureRequest) -> AsyncIterator[Cache]:
    c: Cache
    if request.param == "memory":
        c = MemoryCache()
    else:
        c = RedisCache(service_url("MEMWARDEN_TEST_REDIS_URL"), namespace=f"mwsink{uuid.uuid4().hex[:8]}")
    yield c
    await c.close()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    async with fresh_store(request.param, tmp_path, schema_prefix="mw_sink") as s:
        yield s


@pytest.fixture(params=["sqlite", pytest.param("postgresql-database", marks=pytest.mark.postgres)])
async def replica(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ReplicaStore]:
    if request.param == "sqlite":
        r = await ReplicaStore.open(f"sqlite+aiosqlite:///{tmp_path / 'replica.db'}")
        yield r
        await r.close()
        return
    url = service_url("MEMWARDEN_TEST_POSTGRES_URL")
    name = f"mw_replica_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(url, isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    r = await ReplicaStore.open(make_url(url).set(database=name).render_as_string(hide_password=False))
    try:
        yield r
    finally:
        await r.close()
        async with admin.connect() as conn:
            await conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()


# -- the contract, per sink ------------------------------------------------------------------------


def point(rec: MemoryRecord) -> IndexPoint:
    rng = random.Random(rec.id)
    return IndexPoint(
        memory_id=rec.id,
        tenant_id=rec.tenant_id,
        owner_id=rec.owner_id,
        scope=rec.scope,
        agent_id=None,
        store=None,
        type=rec.type,
        status=rec.status,
        sensitivity_rank=1,
        expires_at_ts=None,
        created_at_ts=rec.created_at.timestamp(),
        importance=0.5,
        dense=[rng.uniform(-1, 1) for _ in range(DENSE_DIM)],
        text=rec.content or "",
    )


async def test_vector_index_sink(index: VectorIndex) -> None:
    t = f"t-{uuid.uuid4().hex[:8]}"
    recs = [record(t, "alice", f"fact {i}") for i in range(5)]
    await index.upsert([point(r) for r in recs])
    sink = VectorIndexSink(index)
    await check_contract(sink, lineage(t, [r.id for r in recs[:3]]))
    assert sorted(await index.present([r.id for r in recs])) == sorted(r.id for r in recs[3:])


async def test_cache_sink(cache: Cache) -> None:
    t = f"t-{uuid.uuid4().hex[:8]}"
    mine = [search_key(t, "alice", f"{i:064x}", "b" * 64) for i in range(3)]
    theirs = search_key(t, "bob", "c" * 64, "d" * 64)
    for key in [*mine, theirs]:
        await cache.set(key, b"[]", 60)
    await check_contract(CacheSink(cache), lineage(t, [], [owner_prefix(t, "alice")]))
    assert await cache.get(theirs) == b"[]"


async def test_store_content_sink(store: SqlStore) -> None:
    t = f"t-{uuid.uuid4().hex[:8]}"
    recs = [await store.insert_memory(record(t, "alice", f"secret fact {i}")) for i in range(4)]
    for r in recs[:2]:
        await store.set_status(t, r.id, Status.TOMBSTONED, now=now())
    await check_contract(StoreContentSink(store), lineage(t, [r.id for r in recs[:2]]))
    for r in recs[:2]:
        row = await store.get_memory(t, r.id)
        assert row is not None and row.content is None and row.content_hash == "" and row.status is Status.TOMBSTONED
    for r in recs[2:]:
        kept = await store.get_memory(t, r.id)
        assert kept is not None and kept.content == r.content


async def test_replica_sink_keeps_tombstones_a_lagging_copy_cannot_overwrite(replica: ReplicaStore) -> None:
    t = f"t-{uuid.uuid4().hex[:8]}"
    recs = [record(t, "alice", f"replicated fact {i}") for i in range(3)]
    for r in recs:
        assert await replica.copy(r)
    never_copied = record(t, "alice", "arrives late")
    doomed = lineage(t, [recs[0].id, recs[1].id, never_copied.id])
    await check_contract(ReplicaSink(replica), doomed)
    # A copy activity that lags the deletion must not bring the content back.
    assert not await replica.copy(recs[0])
    assert not await replica.copy(never_copied)
    assert (await replica.get(recs[0].id))["content"] is None  # type: ignore[index]
    assert (await replica.get(never_copied.id))["content"] is None  # type: ignore[index]
    assert (await replica.get(recs[2].id))["content"] == "replicated fact 2"  # type: ignore[index]
    assert (await ReplicaSink(replica).verify_absent(doomed)).absent


async def test_summary_sink_rederives_from_what_remains(store: SqlStore, tmp_path: Path) -> None:
    t = f"t-{uuid.uuid4().hex[:8]}"
    idx = EdgeIndex(tmp_path / "summary-shard")
    embedder = await asyncio.to_thread(default_embedder)
    sources = [
        (await store.commit_live(record(t, "alice", f"episode {i}. detail.", type=MemoryType.EPISODIC)))[0]
        for i in range(3)
    ]
    summary = await derive(
        store,
        idx,
        embedder,
        ExtractiveSummarizer(),
        tenant_id=t,
        owner_id="alice",
        sources=sources,
        max_chars=4096,
        actor="test",
    )
    assert summary is not None and summary.content == "episode 0.; episode 1.; episode 2."
    await store.set_status(t, sources[1].id, Status.TOMBSTONED, now=now())
    sink = SummarySink(store, idx, embedder, ExtractiveSummarizer(), 4096)
    await check_contract(sink, lineage(t, [sources[1].id]))
    old = await store.get_memory(t, summary.id)
    assert old is not None and old.status is Status.PURGED and old.content is None
    assert old.superseded_by is not None
    new = await store.get_memory(t, old.superseded_by)
    assert new is not None and new.status is Status.ACTIVE and new.content == "episode 2.; episode 0."  # newest first
    assert await idx.present([summary.id, new.id]) == [new.id]
    await idx.close()


async def test_concurrent_edge_purges_share_a_vacuum_that_started_after_their_deletes(tmp_path: Path) -> None:
    idx = EdgeIndex(tmp_path / "shard")
    calls = 0
    real = idx.vacuum

    async def counted() -> None:
        nonlocal calls
        calls += 1
        await real()

    idx.vacuum = counted  # type: ignore[method-assign]
    t = f"t-{uuid.uuid4().hex[:8]}"
    recs = [record(t, "alice", f"fact {i}") for i in range(6)]
    await idx.upsert([point(r) for r in recs])
    sink = VectorIndexSink(idx)
    await asyncio.gather(*(sink.purge(lineage(t, [r.id])) for r in recs))
    assert 1 <= calls < len(recs)  # the first ran alone; the rest waited and shared the next one
    assert await idx.present([r.id for r in recs]) == []
    await sink.purge(lineage(t, [recs[0].id]))  # a retry with nothing to delete still vacuums
    assert calls >= 2
    await idx.close()


async def test_edge_vacuum_runs_out_of_process_so_this_process_keeps_running(tmp_path: Path) -> None:
    """Edge's optimizer holds the GIL; run in this process it would freeze the event loop for its whole run."""
    idx = EdgeIndex(tmp_path / "shard")
    t = f"t-{uuid.uuid4().hex[:8]}"
    recs = [record(t, "alice", f"fact {i}") for i in range(3000)]
    for start in range(0, len(recs), 500):
        await idx.upsert([point(r) for r in recs[start : start + 500]])
    await idx.vacuum()  # settle the segments (an optimized, indexed segment is what a vacuum rebuilds)
    await idx.delete([recs[0].id])
    gaps: list[float] = []
    loop = asyncio.get_running_loop()

    async def tick() -> None:
        last = loop.time()
        while True:
            await asyncio.sleep(0.005)
            now_ = loop.time()
            gaps.append(now_ - last)
            last = now_

    ticker = asyncio.create_task(tick())
    searching = asyncio.create_task(idx.present([recs[1].id]))  # a read during the vacuum waits, then answers
    await idx.vacuum()
    ticker.cancel()
    assert await searching == [recs[1].id]
    assert gaps and max(gaps) < 0.5, gaps[-3:]  # in-process the loop froze for the whole vacuum (no tick at all)
    assert await idx.present([recs[0].id]) == [] and await idx.count() == len(recs) - 1
    assert await idx.health()
    await idx.close()


async def test_a_write_waiting_on_a_vacuum_uses_the_reopened_shard(tmp_path: Path) -> None:
    idx = EdgeIndex(tmp_path / "shard")
    t = f"t-{uuid.uuid4().hex[:8]}"
    recs = [record(t, "alice", f"fact {i}") for i in range(4)]
    await idx.upsert([point(r) for r in recs])
    vacuuming = asyncio.create_task(idx.vacuum())
    await asyncio.sleep(0)  # the vacuum holds the lock now and is about to close the shard
    await idx.delete([recs[0].id])  # waits for it, then must write to the shard it reopened
    await vacuuming
    assert await idx.present([r.id for r in recs]) == [r.id for r in recs[1:]]
    await idx.close()
