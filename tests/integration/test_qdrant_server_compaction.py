"""On the Qdrant server sink, deleted points are compacted (issue 22 part 8).

Against a FAKE remote Qdrant (`tests.qdrant_rest_fake`: no server binary can be installed here),
over real HTTP with the real `AsyncQdrantClient`: a delete alone leaves the points marked deleted in
the segment; the Forget sink's purge deletes, then re-applies the compaction thresholds (an update
that runs the optimizers) and waits for the collection to turn green, after which the segment holds
none of them. Not tested against a real Qdrant server.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import AsyncIterator

import pytest
import uvicorn
from qdrant_client import AsyncQdrantClient

from memwarden.records import IndexPoint, MemoryType, Scope, Status
from memwarden.sinks import Lineage, VectorIndexSink
from memwarden.stores.vectors import DENSE_DIM, point_id
from memwarden.stores.vectors_qdrant import COMPACT_DELETED_THRESHOLD, QdrantClientIndex
from stack.devserver import free_port
from tests.qdrant_rest_fake import FakeQdrant, fake_qdrant_app


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeQdrant, str]]:
    state = FakeQdrant()
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(fake_qdrant_app(state), host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    for _ in range(500):  # polled as tests/stack_support.py polls uvicorn (it has no started event)
        if server.started:
            break
        assert not task.done(), "the fake Qdrant stopped during startup"
        await asyncio.sleep(0.02)
    try:
        yield state, f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def _point(tenant: str, memory_id: str) -> IndexPoint:
    rng = random.Random(memory_id)
    return IndexPoint(
        memory_id=memory_id,
        tenant_id=tenant,
        owner_id="alice",
        scope=Scope.USER,
        agent_id=None,
        store=None,
        type=MemoryType.FACT,
        status=Status.ACTIVE,
        sensitivity_rank=1,
        expires_at_ts=None,
        created_at_ts=0.0,
        importance=0.5,
        dense=[rng.uniform(-1, 1) for _ in range(DENSE_DIM)],
        text="",
    )


async def test_forget_compacts_the_deleted_points_out_of_the_servers_segments(fake: tuple[FakeQdrant, str]) -> None:
    state, url = fake
    name = f"mw-{uuid.uuid4().hex[:8]}"
    index = QdrantClientIndex(AsyncQdrantClient(url=url, check_compatibility=False), name)
    t = "t-compact"
    ids = [str(uuid.uuid4()) for _ in range(150)]  # past Qdrant's 100-vector vacuum bound
    await index.upsert([_point(t, i) for i in ids])
    collection = state.collections[name]
    # Created to compact on any deletion (Qdrant's default, 0.2, would wait for a fifth of the segment).
    assert collection.deleted_threshold == COMPACT_DELETED_THRESHOLD
    # The control: a delete alone only marks points deleted; the segment still holds them.
    await index.delete(ids[:1])
    assert point_id(ids[0]) in collection.marked_deleted

    sink = VectorIndexSink(index)
    assert sink.method == "delete_points+vacuum"
    state.log.clear()
    doomed = Lineage(deletion_id="d", tenant_id=t, memory_ids=tuple(ids[:3]), cache_prefixes=())
    assert await sink.purge(doomed) == 2  # the first was deleted above
    assert collection.marked_deleted == {}  # compacted: no segment holds them any more
    assert (await sink.verify_absent(doomed)).absent
    calls = [(method, path.split("?")[0]) for method, path, _ in state.log]
    deleted = calls.index(("POST", f"/collections/{name}/points/delete"))
    assert "wait=true" in state.log[deleted][1]
    updated = calls.index(("PATCH", f"/collections/{name}"), deleted)
    assert state.log[updated][2]["optimizers_config"]["deleted_threshold"] == COMPACT_DELETED_THRESHOLD
    assert calls[updated + 1 :].count(("GET", f"/collections/{name}")) >= 2  # waited out the optimization
    assert len(collection.live) == 147
    await index.close()
