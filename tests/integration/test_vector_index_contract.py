"""One contract for every VectorIndex engine: Qdrant Edge (tmp dir) and qdrant-client local mode.

Real engines, real MiniLM vectors, real BM25. The central property: the read filter is applied
inside the query, so nothing a principal may not read is ever returned, however good a match it is.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memwarden.config import Settings
from memwarden.embed import MiniLMEmbedder, default_embedder
from memwarden.records import (
    SENSITIVITY_ORDER,
    IndexPoint,
    MemoryRecord,
    MemoryType,
    NamespaceClause,
    ReadFilter,
    Scope,
    Sensitivity,
    SourceKind,
    Status,
)
from memwarden.stores.vector_backends import open_index
from memwarden.stores.vectors import VectorIndex
from memwarden.stores.vectors_edge import EdgeIndex
from memwarden.stores.vectors_qdrant import QdrantClientIndex

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect in the local Qdrant:UserWarning")

NOW = 1_800_000_000.0
T1, T2 = "tenant-1", "tenant-2"
U1, U2 = "user-1", "user-2"


@pytest.fixture(scope="session")
def embedder() -> MiniLMEmbedder:
    return default_embedder()


def point(
    embedder: MiniLMEmbedder,
    text: str,
    *,
    tenant_id: str = T1,
    owner_id: str = U1,
    scope: Scope = Scope.USER,
    agent_id: str | None = None,
    store: str | None = None,
    type: MemoryType = MemoryType.FACT,
    status: Status = Status.ACTIVE,
    sensitivity: Sensitivity = Sensitivity.LOW,
    expires_at_ts: float | None = None,
    memory_id: str | None = None,
) -> IndexPoint:
    return IndexPoint(
        memory_id=memory_id or str(uuid.uuid4()),
        tenant_id=tenant_id,
        owner_id=owner_id,
        scope=scope,
        agent_id=agent_id,
        store=store,
        type=type,
        status=status,
        sensitivity_rank=SENSITIVITY_ORDER.index(sensitivity),
        expires_at_ts=expires_at_ts,
        created_at_ts=NOW - 3600,
        importance=0.5,
        dense=embedder.embed([text])[0],
        text=text,
    )


def point_fields() -> dict[str, object]:
    return {
        "memory_id": str(uuid.uuid4()),
        "tenant_id": T1,
        "owner_id": U1,
        "scope": Scope.USER,
        "agent_id": None,
        "store": None,
        "type": MemoryType.FACT,
        "status": Status.ACTIVE,
        "sensitivity_rank": 1,
        "expires_at_ts": None,
        "created_at_ts": NOW,
        "importance": 0.5,
        "dense": [0.1] * 384,
        "text": "x",
    }


def user_filter(tenant_id: str = T1, owner_id: str = U1, **kw: object) -> ReadFilter:
    return ReadFilter(tenant_id=tenant_id, clauses=(NamespaceClause(scope=Scope.USER, owner_ids=(owner_id,)),), **kw)


async def ids_for(
    index: VectorIndex,
    embedder: MiniLMEmbedder,
    query: str,
    read_filter: ReadFilter,
    *,
    limit: int = 10,
    **weights: float,
) -> list[str]:
    hits = await index.search(
        dense=embedder.embed([query])[0], text=query, read_filter=read_filter, now_ts=NOW, limit=limit, **weights
    )
    assert all(h.score > 0 for h in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    return [h.memory_id for h in hits]


async def test_keyword_search_finds_the_rare_term(index: VectorIndex, embedder: MiniLMEmbedder) -> None:
    target = point(embedder, "The spare key is taped under the zebrawood shelf")
    others = [point(embedder, t) for t in ("I live in Berlin", "Prefers aisle seats", "Allergic to peanuts")]
    await index.upsert([*others, target])
    found = await ids_for(index, embedder, "zebrawood", user_filter(), dense_weight=0.0)
    assert found == [target.memory_id]  # sparse-only: only the point sharing the token


async def test_bm25_idf_is_counted_within_the_tenant(index: VectorIndex, embedder: MiniLMEmbedder) -> None:
    rare_here = point(embedder, "zebrawood")
    common_here = [point(embedder, "shelf"), point(embedder, "a tall shelf")]
    await index.upsert([rare_here, *common_here])
    before = await ids_for(index, embedder, "zebrawood shelf", user_filter(), dense_weight=0.0)
    assert before[0] == rare_here.memory_id  # the rarer term (in this tenant) weighs more
    # Another tenant makes "zebrawood" common; with collection-wide IDF "shelf" would now win.
    await index.upsert([point(embedder, "zebrawood zebrawood", tenant_id=T2) for _ in range(30)])
    after = await ids_for(index, embedder, "zebrawood shelf", user_filter(), dense_weight=0.0)
    assert after == before


async def test_dense_search_finds_a_paraphrase(index: VectorIndex, embedder: MiniLMEmbedder) -> None:
    berlin = point(embedder, "I live in Berlin")
    others = [point(embedder, t) for t in ("The invoice is overdue", "Prefers aisle seats on flights")]
    await index.upsert([berlin, *others])
    found = await ids_for(index, embedder, "Which city is my home?", user_filter(), sparse_weight=0.0)
    assert found[0] == berlin.memory_id
    hybrid = await ids_for(index, embedder, "Which city is my home?", user_filter())
    assert hybrid[0] == berlin.memory_id


async def test_nearest_scores_are_cosine_similarities_inside_the_filter(
    index: VectorIndex, embedder: MiniLMEmbedder
) -> None:
    texts = ["I live in Berlin", "The invoice is overdue"]
    mine = [point(embedder, t) for t in texts]
    foreign = point(embedder, "I live in Berlin", owner_id=U2)  # identical text, another owner
    await index.upsert([*mine, foreign])
    query = embedder.embed(["My home is in Berlin"])[0]
    hits = await index.nearest(dense=query, read_filter=user_filter(), now_ts=NOW, limit=5)
    assert [h.memory_id for h in hits] == [mine[0].memory_id, mine[1].memory_id]
    for hit, p in zip(hits, mine, strict=True):
        expected = sum(a * b for a, b in zip(query, p.dense, strict=True))  # unit vectors: dot == cosine
        assert hit.score == pytest.approx(expected, abs=1e-3)
    assert hits[0].score > 0.6 > hits[1].score


async def test_other_tenant_never_returned_even_as_best_match(index: VectorIndex, embedder: MiniLMEmbedder) -> None:
    query = "my bank account number ends in 1234"
    foreign = point(embedder, query, tenant_id=T2)  # identical text: the best possible match
    foreign_other_owner = point(embedder, query, tenant_id=T2, owner_id=U2)
    mine = point(embedder, "I bank with a local credit union")
    await index.upsert([foreign, foreign_other_owner, mine])
    found = await ids_for(index, embedder, query, user_filter(), limit=50)
    assert found == [mine.memory_id]
    other_side = await ids_for(index, embedder, query, user_filter(tenant_id=T2), limit=50)
    assert other_side == [foreign.memory_id]


async def test_namespace_clauses_scope_owner_agent_store(index: VectorIndex, embedder: MiniLMEmbedder) -> None:
    text = "the team standup moved to 9:30"
    mine = point(embedder, text, scope=Scope.USER, owner_id=U1)
    theirs = point(embedder, text, scope=Scope.USER, owner_id=U2)
    my_agent = point(embedder, text, scope=Scope.AGENT, agent_id="agent-a", owner_id=U1)
    other_agent = point(embedder, text, scope=Scope.AGENT, agent_id="agent-b", owner_id=U1)
    agent_other_owner = point(embedder, text, scope=Scope.AGENT, agent_id="agent-a", owner_id=U2)
    shared_in = point(embedder, text, scope=Scope.SHARED, store="team-x", owner_id=U2)
    shared_out = point(embedder, text, scope=Scope.SHARED, store="team-y", owner_id=U2)
    await index.upsert([mine, theirs, my_agent, other_agent, agent_other_owner, shared_in, shared_out])
    rf = ReadFilter(
        tenant_id=T1,
        clauses=(
            NamespaceClause(scope=Scope.USER, owner_ids=(U1,)),
            NamespaceClause(scope=Scope.AGENT, agent_id="agent-a", owner_ids=(U1,)),
            NamespaceClause(scope=Scope.SHARED, stores=("team-x",)),
        ),
    )
    found = await ids_for(index, embedder, text, rf, limit=20)
    assert set(found) == {mine.memory_id, my_agent.memory_id, shared_in.memory_id}

    only_agent = ReadFilter(tenant_id=T1, clauses=(NamespaceClause(scope=Scope.AGENT, agent_id="agent-b"),))
    assert await ids_for(index, embedder, text, only_agent) == [other_agent.memory_id]


async def test_type_filter(index: VectorIndex, embedder: MiniLMEmbedder) -> None:
    pref = point(embedder, "likes dark mode in every app", type=MemoryType.PREFERENCE)
    fact = point(embedder, "uses dark mode on the laptop", type=MemoryType.FACT)
    await index.upsert([pref, fact])
    found = await ids_for(index, embedder, "dark mode", user_filter(types=(MemoryType.PREFERENCE,)))
    assert found == [pref.memory_id]
    both = await ids_for(index, embedder, "dark mode", user_filter())
    assert set(both) == {pref.memory_id, fact.memory_id}


async def test_sensitivity_ceiling(index: VectorIndex, embedder: MiniLMEmbedder) -> None:
    low = point(embedder, "blood type is O negative", sensitivity=Sensitivity.LOW)
    internal = point(embedder, "blood type noted at the clinic", sensitivity=Sensitivity.INTERNAL)
    restricted = point(embedder, "blood test results were abnormal", sensitivity=Sensitivity.RESTRICTED)
    await index.upsert([low, internal, restricted])
    found = await ids_for(index, embedder, "blood", user_filter(max_sensitivity=Sensitivity.INTERNAL))
    assert set(found) == {low.memory_id, internal.memory_id}
    public_only = await ids_for(index, embedder, "blood", user_filter(max_sensitivity=Sensitivity.PUBLIC))
    assert public_only == []


async def test_status_filter_and_set_status(index: VectorIndex, embedder: MiniLMEmbedder) -> None:
    active = point(embedder, "prefers tea over coffee")
    pending = point(embedder, "prefers green tea", status=Status.PENDING)
    stale = point(embedder, "drinks tea at 4pm", status=Status.STALE)
    await index.upsert([active, pending, stale])
    assert set(await ids_for(index, embedder, "tea", user_filter())) == {active.memory_id, stale.memory_id}

    await index.set_status([active.memory_id, str(uuid.uuid4())], Status.TOMBSTONED)  # unknown id: no error
    assert await ids_for(index, embedder, "tea", user_filter()) == [stale.memory_id]
    tombstoned = await ids_for(index, embedder, "tea", user_filter(statuses=(Status.TOMBSTONED,)))
    assert tombstoned == [active.memory_id]

    await index.set_status([pending.memory_id], Status.ACTIVE)
    assert set(await ids_for(index, embedder, "tea", user_filter())) == {pending.memory_id, stale.memory_id}


async def test_expired_points_are_excluded(index: VectorIndex, embedder: MiniLMEmbedder) -> None:
    expired = point(embedder, "the parking spot is B12 today", expires_at_ts=NOW - 1)
    at_now = point(embedder, "the parking spot is C3 today", expires_at_ts=NOW)
    future = point(embedder, "the parking spot is B7 this week", expires_at_ts=NOW + 86400)
    forever = point(embedder, "my car is a blue hatchback")
    await index.upsert([expired, at_now, future, forever])
    found = await ids_for(index, embedder, "parking spot car", user_filter())
    assert set(found) == {future.memory_id, forever.memory_id}


async def test_delete_and_present(index: VectorIndex, embedder: MiniLMEmbedder) -> None:
    a = point(embedder, "my dentist is Dr. Okafor")
    b = point(embedder, "my dentist appointment is in May")
    await index.upsert([a, b])
    unknown = str(uuid.uuid4())
    assert sorted(await index.present([a.memory_id, b.memory_id, unknown])) == sorted([a.memory_id, b.memory_id])

    await index.delete([a.memory_id, unknown])
    await index.delete([a.memory_id])  # idempotent
    assert await index.present([a.memory_id, b.memory_id]) == [b.memory_id]
    assert await index.count() == 1
    assert await ids_for(index, embedder, "dentist", user_filter()) == [b.memory_id]
    assert await index.present([]) == []


async def test_upsert_is_idempotent_and_replaces(index: VectorIndex, embedder: MiniLMEmbedder) -> None:
    p = point(embedder, "works from the Lisbon office on Fridays")
    await index.upsert([p])
    await index.upsert([p])
    assert await index.count() == 1
    moved = p.model_copy(update={"owner_id": U2})
    await index.upsert([moved])
    assert await index.count() == 1
    assert await ids_for(index, embedder, "Lisbon office", user_filter()) == []
    assert await ids_for(index, embedder, "Lisbon office", user_filter(owner_id=U2)) == [p.memory_id]


async def test_filter_that_admits_nothing_returns_nothing(index: VectorIndex, embedder: MiniLMEmbedder) -> None:
    await index.upsert([point(embedder, "likes jazz"), point(embedder, "likes jazz", scope=Scope.SHARED, store="s")])
    assert await ids_for(index, embedder, "jazz", ReadFilter(tenant_id=T1, clauses=())) == []
    no_owner = ReadFilter(tenant_id=T1, clauses=(NamespaceClause(scope=Scope.USER, owner_ids=()),))
    assert await ids_for(index, embedder, "jazz", no_owner) == []
    no_store = ReadFilter(tenant_id=T1, clauses=(NamespaceClause(scope=Scope.SHARED, stores=()),))
    assert await ids_for(index, embedder, "jazz", no_store) == []
    assert await ids_for(index, embedder, "jazz", user_filter(types=())) == []
    assert await ids_for(index, embedder, "jazz", user_filter(statuses=())) == []
    assert len(await ids_for(index, embedder, "jazz", user_filter())) == 1


async def test_stopword_only_text_still_indexed_and_searchable(index: VectorIndex, embedder: MiniLMEmbedder) -> None:
    p = point(embedder, "it is what it is")
    await index.upsert([p])
    assert await ids_for(index, embedder, "the", user_filter()) == [p.memory_id]


async def test_search_argument_checks(index: VectorIndex) -> None:
    with pytest.raises(ValueError, match="dimensions"):
        await index.search(dense=[0.1] * 3, text="x", read_filter=user_filter(), now_ts=NOW, limit=5)
    bad = IndexPoint.model_validate({**point_fields(), "dense": [0.1] * 3})
    with pytest.raises(ValueError, match="dimensions"):
        await index.upsert([bad])
    with pytest.raises(ValueError, match="limit"):
        await index.search(dense=[0.1] * 384, text="x", read_filter=user_filter(), now_ts=NOW, limit=0)
    with pytest.raises(ValueError, match="weights"):
        await index.search(
            dense=[0.1] * 384, text="x", read_filter=user_filter(), now_ts=NOW, limit=5, dense_weight=0, sparse_weight=0
        )


async def test_ensure_is_repeatable_and_health(index: VectorIndex, embedder: MiniLMEmbedder) -> None:
    await index.upsert([point(embedder, "likes hiking")])
    await index.ensure()
    assert await index.count() == 1
    assert await index.health() is True


def _record(p: IndexPoint) -> MemoryRecord:
    created = datetime.fromtimestamp(p.created_at_ts, UTC)
    return MemoryRecord(
        id=p.memory_id,
        tenant_id=p.tenant_id,
        owner_id=p.owner_id,
        scope=p.scope,
        agent_id=p.agent_id,
        store=p.store,
        type=p.type,
        content=None,
        content_hash="0" * 64,
        source_kind=SourceKind.USER,
        reason="user_stated_fact",
        sensitivity=SENSITIVITY_ORDER[p.sensitivity_rank],
        expires_at=None if p.expires_at_ts is None else datetime.fromtimestamp(p.expires_at_ts, UTC),
        status=p.status,
        created_at=created,
        updated_at=created,
    )


async def test_index_filter_equals_the_python_predicate(index: VectorIndex, embedder: MiniLMEmbedder) -> None:
    """The engine's filter and ReadFilter.admits agree point for point on a varied population."""
    rng = random.Random(7)
    dense = embedder.embed(["a note about the weekly planning meeting"])[0]
    points: list[IndexPoint] = []
    statuses = [Status.ACTIVE] * 6 + [Status.STALE] * 2 + list(Status)
    for _ in range(150):
        scope = rng.choice(list(Scope))
        p = IndexPoint(
            memory_id=str(uuid.uuid4()),
            tenant_id=rng.choice([T1, T2]),
            owner_id=rng.choice([U1, U2]),
            scope=scope,
            agent_id=rng.choice(["agent-a", "agent-b"]) if scope is Scope.AGENT else None,
            store=rng.choice(["s1", "s2"]) if scope is Scope.SHARED else None,
            type=rng.choice(list(MemoryType)),
            status=rng.choice(statuses),
            sensitivity_rank=rng.randrange(len(SENSITIVITY_ORDER)),
            expires_at_ts=rng.choice([None, NOW - 10, NOW + 10]),
            created_at_ts=NOW - rng.randrange(1, 10_000),
            importance=rng.random(),
            dense=dense,
            text="weekly planning meeting",
        )
        points.append(p)
    await index.upsert(points)
    filters = [
        user_filter(),
        ReadFilter(
            tenant_id=T1,
            clauses=(
                NamespaceClause(scope=Scope.USER, owner_ids=(U1, U2)),
                NamespaceClause(scope=Scope.AGENT, agent_id="agent-a"),
                NamespaceClause(scope=Scope.SHARED, stores=("s1",)),
            ),
            types=(MemoryType.FACT, MemoryType.PREFERENCE, MemoryType.TASK),
            max_sensitivity=Sensitivity.INTERNAL,
        ),
        ReadFilter(
            tenant_id=T2,
            clauses=(NamespaceClause(scope=Scope.SHARED), NamespaceClause(scope=Scope.AGENT, owner_ids=(U2,))),
            statuses=tuple(Status),
            max_sensitivity=Sensitivity.RESTRICTED,
        ),
    ]
    now = datetime.fromtimestamp(NOW, UTC)
    for rf in filters:
        expected = {p.memory_id for p in points if rf.admits(_record(p), now)}
        assert 3 <= len(expected) < 100, "every filter should find some, and fewer than the limit"
        found = await ids_for(index, embedder, "weekly planning meeting", rf, limit=100)
        assert len(found) == len(set(found))
        assert set(found) == expected


async def test_edge_survives_close_and_reopen(tmp_path: Path, embedder: MiniLMEmbedder) -> None:
    path = tmp_path / "shard"
    first = EdgeIndex(path)
    p = point(embedder, "my sister's name is Ana")
    await first.upsert([p])  # lazily ensures
    await first.set_status([p.memory_id], Status.STALE)
    await first.close()
    assert await first.health() is False

    second = EdgeIndex(path)
    await second.ensure()
    assert await second.health() is True
    assert await second.count() == 1
    assert await ids_for(second, embedder, "sister Ana", user_filter()) == [p.memory_id]
    assert await ids_for(second, embedder, "sister Ana", user_filter(statuses=(Status.ACTIVE,))) == []
    await second.close()


def _files_containing(root: Path, needles: list[bytes]) -> list[str]:
    return [
        str(f.relative_to(root)) for f in root.rglob("*") if f.is_file() and any(n in f.read_bytes() for n in needles)
    ]


async def test_edge_vacuum_drops_deleted_points_and_text_is_never_stored(
    tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    path = tmp_path / "shard"
    idx = EdgeIndex(path)
    secret_text = "Quixotically my favourite xylophonist is Zanzibar"
    gone = point(embedder, secret_text, owner_id="owner-to-forget")
    kept = [point(embedder, f"kept note {i}") for i in range(5)]
    await idx.upsert([gone, *kept])
    assert _files_containing(path, [secret_text.encode(), b"Zanzibar"]) == []
    needles = [uuid.UUID(gone.memory_id).bytes, gone.memory_id.encode(), b"owner-to-forget"]
    assert _files_containing(path, needles), "the point is on disk before it is forgotten"

    await idx.delete([gone.memory_id])
    await idx.vacuum()
    assert _files_containing(path, needles) == []
    assert await idx.count() == 5
    assert sorted(await idx.present([p.memory_id for p in kept])) == sorted(p.memory_id for p in kept)
    await idx.close()


async def test_open_index_from_settings(tmp_path: Path, embedder: MiniLMEmbedder) -> None:
    edge = open_index(Settings(data_dir=tmp_path))
    assert isinstance(edge, EdgeIndex)
    local = open_index(Settings(data_dir=tmp_path, vector_backend="qdrant", qdrant_location=":memory:"))
    assert isinstance(local, QdrantClientIndex)
    on_disk = open_index(
        Settings(data_dir=tmp_path, vector_backend="qdrant", qdrant_location=str(tmp_path / "q"), qdrant_collection="c")
    )
    for idx in (edge, local, on_disk):
        p = point(embedder, "favourite colour is green")
        await idx.upsert([p])
        assert await idx.present([p.memory_id]) == [p.memory_id]
        await idx.close()
    assert (tmp_path / "index" / "edge_config.json").exists()


async def test_hybrid_returns_real_scores_from_both_retrievers(index: VectorIndex, embedder: MiniLMEmbedder) -> None:
    keyword = point(embedder, "The spare key is taped under the zebrawood shelf")
    meaning = point(embedder, "I live in Berlin")
    unrelated = point(embedder, "Allergic to peanuts")
    await index.upsert([keyword, meaning, unrelated])
    query = "zebrawood: which city is my home?"
    dense = embedder.embed([query])[0]
    got = await index.hybrid(dense=dense, text=query, read_filter=user_filter(), now_ts=NOW, limit=10)
    # Dense: every readable point, scored by cosine (unit vectors: dot product).
    assert {h.memory_id for h in got.dense} == {keyword.memory_id, meaning.memory_id, unrelated.memory_id}
    by_id = {p.memory_id: p for p in (keyword, meaning, unrelated)}
    for hit in got.dense:
        expected = sum(a * b for a, b in zip(dense, by_id[hit.memory_id].dense, strict=True))
        assert hit.score == pytest.approx(expected, abs=1e-3)
    # Sparse: only points sharing a non-stop-word token, with a positive BM25 score (not a rank).
    assert [h.memory_id for h in got.sparse] == [keyword.memory_id]
    assert got.sparse[0].score > 0.5


async def test_hybrid_applies_the_filter_inside_both_retrievers(index: VectorIndex, embedder: MiniLMEmbedder) -> None:
    text = "my locker code is kept in the zebrawood box"
    foreign = [
        point(embedder, text, tenant_id=T2),
        point(embedder, text, owner_id=U2),
        point(embedder, text, status=Status.TOMBSTONED),
        point(embedder, text, sensitivity=Sensitivity.RESTRICTED),
        point(embedder, text, expires_at_ts=NOW - 1),
    ]
    mine = point(embedder, "a box of tools in the garage")
    await index.upsert([*foreign, mine])
    rf = user_filter().model_copy(update={"max_sensitivity": Sensitivity.CONFIDENTIAL})
    dense = embedder.embed([text])[0]
    got = await index.hybrid(dense=dense, text=text, read_filter=rf, now_ts=NOW, limit=50)
    assert [h.memory_id for h in got.dense] == [mine.memory_id]
    assert [h.memory_id for h in got.sparse] == [mine.memory_id]  # shares "box"
    nothing = ReadFilter(tenant_id=T1, clauses=(NamespaceClause(scope=Scope.USER, owner_ids=()),))
    empty = await index.hybrid(dense=dense, text=text, read_filter=nothing, now_ts=NOW, limit=5)
    assert empty.dense == [] and empty.sparse == []
    stopwords = await index.hybrid(dense=dense, text="the and of", read_filter=rf, now_ts=NOW, limit=5)
    assert stopwords.sparse == [] and [h.memory_id for h in stopwords.dense] == [mine.memory_id]


async def test_hybrid_idf_is_counted_over_the_readable_namespaces(index: VectorIndex, embedder: MiniLMEmbedder) -> None:
    rare_here = point(embedder, "zebrawood")
    common_here = [point(embedder, "shelf"), point(embedder, "a tall shelf")]
    await index.upsert([rare_here, *common_here])
    query = "zebrawood shelf"
    dense = embedder.embed([query])[0]

    async def sparse_order() -> list[str]:
        got = await index.hybrid(dense=dense, text=query, read_filter=user_filter(), now_ts=NOW, limit=10)
        return [h.memory_id for h in got.sparse]

    before = await sparse_order()
    assert before[0] == rare_here.memory_id
    # Another person in the *same* tenant makes "zebrawood" common: our scores must not move.
    await index.upsert([point(embedder, "zebrawood zebrawood", owner_id=U2) for _ in range(30)])
    assert await sparse_order() == before
