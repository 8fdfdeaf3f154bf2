"""An index records whose vectors it holds, and a worker rebuilds it from the store when the embedder changes.

Real engines (Qdrant Edge, qdrant-client local mode), the real store and the real MiniLM embedder. The
"other embedder" that built an index earlier is `OtherModel` (named so): the real model's vectors
permuted, which is what a different model's vectors are to this one, unrelated directions of the
same size.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memwarden.embed import MODEL_ID, MiniLMEmbedder, default_embedder
from memwarden.identity import Principal, Role, read_filter
from memwarden.records import Status
from memwarden.services.indexing import adopt_embedder
from memwarden.stores.sql import SqlStore
from memwarden.stores.vectors import VectorIndex, index_point
from memwarden.stores.vectors_edge import EdgeIndex
from tests.integration.test_edge_group_flush import T, record

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect in the local Qdrant:UserWarning")


class OtherModel:
    """Stand-in for another embedding model (named so): this model's vectors with their dimensions permuted."""

    dim = 384
    model_id = "other-model-v0"

    def __init__(self, real: MiniLMEmbedder, *, fail_after: int | None = None) -> None:
        self._real = real
        self._order = list(range(self.dim))[::-1]
        self._left = fail_after

    def embed(self, texts: list[str]) -> list[list[float]]:
        if self._left is not None:
            if self._left < len(texts):
                raise RuntimeError("synthetic: the embedder stopped mid-rebuild")
            self._left -= len(texts)
        return [[v[i] for i in self._order] for v in self._real.embed(texts)]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    s = await SqlStore.open(f"sqlite+aiosqlite:///{tmp_path / 'm.db'}")
    await s.migrate()
    yield s
    await s.close()


async def _top_score(index: VectorIndex, embedder: MiniLMEmbedder, text: str) -> tuple[str, float]:
    hits = await index.nearest(
        dense=embedder.embed([text])[0],
        read_filter=read_filter(Principal(tenant=T, sub="alice", role=Role.USER)),
        now_ts=datetime.now(UTC).timestamp(),
        limit=1,
    )
    return hits[0].memory_id, hits[0].score


async def test_an_index_records_whose_vectors_it_holds(index: VectorIndex) -> None:
    assert await index.embedder() is None
    await index.record_embedder("model-a")
    assert await index.embedder() == "model-a"
    await index.record_embedder("model-b")
    assert await index.embedder() == "model-b"


async def test_the_edge_record_survives_a_restart(tmp_path: Path) -> None:
    first = EdgeIndex(tmp_path / "shard")
    await first.record_embedder(MODEL_ID)
    await first.close()
    again = EdgeIndex(tmp_path / "shard")
    try:
        assert await again.embedder() == MODEL_ID
    finally:
        await again.close()


async def test_an_index_built_by_another_embedder_is_rebuilt_from_the_store(
    index: VectorIndex, store: SqlStore
) -> None:
    real = default_embedder()
    other = OtherModel(real)
    bike, plants = record("synthetic: alice's bike is green"), record("synthetic: alice waters the plants on sundays")
    gone = record("synthetic: alice's locker code")
    for r in (bike, plants, gone):
        await store.insert_memory(r)
    await index.upsert(
        [
            index_point(r, v)
            for r, v in zip(
                (bike, plants, gone),
                other.embed([bike.content or "", plants.content or "", gone.content or ""]),
                strict=True,
            )
        ]
    )
    await index.record_embedder(other.model_id)
    await store.set_status(T, gone.id, Status.TOMBSTONED, now=datetime.now(UTC))
    # Built by the other model, the index cannot tell the bike from the plants for this model's query.
    assert (await _top_score(index, real, "synthetic: alice's bike is green"))[1] < 0.9

    assert await adopt_embedder(store, index, real) == 3
    assert await index.embedder() == MODEL_ID
    found, score = await _top_score(index, real, "synthetic: alice's bike is green")
    assert found == bike.id and score > 0.999
    assert await index.present([gone.id]) == []  # the rebuild applies every change, deletions too
    # Recorded: the next start finds nothing to do.
    assert await adopt_embedder(store, index, real) == 0


async def test_an_index_with_points_and_no_record_is_rebuilt(index: VectorIndex, store: SqlStore) -> None:
    """An index from before the record existed holds some earlier embedder's vectors: rebuild it."""
    real = default_embedder()
    kept = record("synthetic: alice prefers window seats")
    await store.insert_memory(kept)
    await index.upsert([index_point(kept, OtherModel(real).embed([kept.content or ""])[0])])
    assert await adopt_embedder(store, index, real) == 1
    assert (await _top_score(index, real, kept.content or ""))[1] > 0.999


async def test_a_new_index_is_only_recorded(index: VectorIndex, store: SqlStore) -> None:
    await store.insert_memory(record("synthetic: not yet indexed anywhere"))
    assert await adopt_embedder(store, index, default_embedder()) == 0
    assert await index.embedder() == MODEL_ID
    assert await index.count() == 0


async def test_a_rebuild_that_stops_midway_is_not_recorded_and_runs_again(index: VectorIndex, store: SqlStore) -> None:
    real = default_embedder()
    records = [record(f"synthetic: alice note {i}") for i in range(3)]
    for r in records:
        await store.insert_memory(r)
    await index.upsert(
        [index_point(r, v) for r, v in zip(records, real.embed([r.content or "" for r in records]), strict=True)]
    )
    await index.record_embedder(MODEL_ID)

    stopping = OtherModel(real, fail_after=0)
    with pytest.raises(RuntimeError, match="mid-rebuild"):
        await adopt_embedder(store, index, stopping)
    assert await index.embedder() == MODEL_ID  # not the embedder whose rebuild did not finish

    assert await adopt_embedder(store, index, OtherModel(real)) == 3
    assert await index.embedder() == OtherModel.model_id
