"""A Qdrant server (or qdrant-client's local mode, in tests) through `AsyncQdrantClient`.

Same contract as the Edge shard: named dense vector "dense" (cosine), sparse "bm25" with the IDF
modifier, keyword payload indexes with `tenant_id` marked `is_tenant` so the server co-locates each
tenant's points. BM25 vectors are computed in-process with `qdrant_edge.Bm25`, exactly as for Edge,
so a memory scores the same on either engine. Writes wait for the server to apply them.
"""

from __future__ import annotations

import asyncio

from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import UnexpectedResponse

from memwarden.records import Hit, IndexPoint, NamespaceClause, ReadFilter, Status, sensitivity_rank
from memwarden.stores.vectors import (
    DENSE,
    DENSE_DIM,
    FLOAT_FIELDS,
    INTEGER_FIELDS,
    KEYWORD_FIELDS,
    RRF_K,
    SPARSE,
    TENANT_FIELD,
    HybridHits,
    bm25_document,
    bm25_query,
    check_dim,
    check_search_args,
    matches_nothing,
    payload_of,
    point_id,
    prefetch_limit,
    satisfiable_clauses,
)


def qdrant_filter(read_filter: ReadFilter, now_ts: float) -> models.Filter | None:
    """ReadFilter -> qdrant-client filter; None means "admits nothing" (do not query at all)."""
    if matches_nothing(read_filter):
        return None
    must: list[models.Condition] = [
        models.FieldCondition(key="tenant_id", match=models.MatchValue(value=read_filter.tenant_id)),
        models.FieldCondition(key="status", match=models.MatchAny(any=[s.value for s in read_filter.statuses])),
    ]
    if read_filter.types is not None:
        must.append(models.FieldCondition(key="type", match=models.MatchAny(any=[t.value for t in read_filter.types])))
    must.append(
        models.FieldCondition(
            key="sensitivity_rank", range=models.Range(lte=sensitivity_rank(read_filter.max_sensitivity))
        )
    )
    must.append(
        models.Filter(
            should=[
                models.IsEmptyCondition(is_empty=models.PayloadField(key="expires_at_ts")),
                models.FieldCondition(key="expires_at_ts", range=models.Range(gt=now_ts)),
            ]
        )
    )
    must.append(models.Filter(should=[_clause_filter(c) for c in satisfiable_clauses(read_filter)]))
    return models.Filter(must=must)


def _clause_filter(clause: NamespaceClause) -> models.Filter:
    must: list[models.Condition] = [
        models.FieldCondition(key="scope", match=models.MatchValue(value=clause.scope.value))
    ]
    if clause.owner_ids is not None:
        must.append(models.FieldCondition(key="owner_id", match=models.MatchAny(any=list(clause.owner_ids))))
    if clause.agent_id is not None:
        must.append(models.FieldCondition(key="agent_id", match=models.MatchValue(value=clause.agent_id)))
    if clause.stores is not None:
        must.append(models.FieldCondition(key="store", match=models.MatchAny(any=list(clause.stores))))
    return models.Filter(must=must)


def _index_schemas() -> dict[str, models.PayloadSchemaType | models.PayloadSchemaParams]:
    schemas: dict[str, models.PayloadSchemaType | models.PayloadSchemaParams] = {
        f: models.PayloadSchemaType.KEYWORD for f in KEYWORD_FIELDS
    }
    schemas[TENANT_FIELD] = models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True)
    schemas.update(
        {
            f: models.IntegerIndexParams(type=models.IntegerIndexType.INTEGER, lookup=True, range=True)
            for f in INTEGER_FIELDS
        }
    )
    schemas.update({f: models.PayloadSchemaType.FLOAT for f in FLOAT_FIELDS})
    return schemas


COMPACT_DELETED_THRESHOLD = 1e-9
"""The vacuum optimizer rebuilds a segment once this fraction of it is deleted: any deletion at all.

Qdrant's default (0.2) leaves a forgotten memory's vector and payload in a segment until a fifth of
it is deleted; an erasure cannot wait for that."""
COMPACT_MIN_VECTORS = 100
"""Segments smaller than this are not vacuumed (Qdrant's own lower bound for the setting)."""
COMPACT_WAIT_SECONDS = 60.0
COMPACT_POLL_SECONDS = 0.2


def compaction_config() -> models.OptimizersConfigDiff:
    """The optimizer settings a forgetting collection runs with (on create, and re-applied by `vacuum`)."""
    return models.OptimizersConfigDiff(
        deleted_threshold=COMPACT_DELETED_THRESHOLD, vacuum_min_vector_number=COMPACT_MIN_VECTORS
    )


EMBEDDER_KEY = "memwarden_embedder"
"""The collection's metadata key naming the embedder whose vectors it holds (Qdrant merges metadata keys)."""


class CompactionTimeout(TimeoutError):
    """The server's optimizers did not settle in time: the purge activity fails and is retried."""


class QdrantClientIndex:
    """A `VectorIndex` on one collection; owns `client` and closes it in `close()`."""

    def __init__(
        self,
        client: AsyncQdrantClient,
        collection: str,
        *,
        dim: int = DENSE_DIM,
        shard_number: int | None = None,
        replication_factor: int | None = None,
    ) -> None:
        self._client = client
        self._collection = collection
        self._dim = dim
        # Cluster layout, used only when this process creates the collection (None: the server's default).
        self._shard_number = shard_number
        self._replication_factor = replication_factor
        self._ready = False

    async def ensure(self) -> None:
        if self._ready:
            return
        if not await self._client.collection_exists(self._collection):
            try:
                await self._client.create_collection(
                    self._collection,
                    vectors_config={DENSE: models.VectorParams(size=self._dim, distance=models.Distance.COSINE)},
                    sparse_vectors_config={SPARSE: models.SparseVectorParams(modifier=models.Modifier.IDF)},
                    shard_number=self._shard_number,
                    replication_factor=self._replication_factor,
                    optimizers_config=compaction_config(),
                )
            except (UnexpectedResponse, ValueError):
                # Another process created it between our check and our create; it must exist now.
                if not await self._client.collection_exists(self._collection):
                    raise
        info = await self._client.get_collection(self._collection)
        existing = set(info.payload_schema or {})
        for field, schema in _index_schemas().items():
            if field not in existing:
                await self._client.create_payload_index(self._collection, field, field_schema=schema, wait=True)
        self._ready = True

    async def upsert(self, points: list[IndexPoint]) -> None:
        if not points:
            return
        await self.ensure()
        structs = []
        for p in points:
            check_dim(p.memory_id, p.dense, self._dim)
            vector: dict[str, list[float] | models.SparseVector] = {DENSE: p.dense}
            sparse = bm25_document(p.text)
            if sparse is not None:
                vector[SPARSE] = models.SparseVector(indices=list(sparse.indices), values=list(sparse.values))
            structs.append(models.PointStruct(id=point_id(p.memory_id), vector=vector, payload=payload_of(p)))
        await self._client.upsert(self._collection, points=structs, wait=True)

    async def set_status(self, memory_ids: list[str], status: Status) -> None:
        if not memory_ids:
            return
        await self.ensure()
        # By filter, not by id list: the server answers 404 for an id it no longer holds.
        selector = models.Filter(must=[models.HasIdCondition(has_id=[point_id(m) for m in memory_ids])])
        await self._client.set_payload(
            self._collection, payload={"status": Status(status).value}, points=selector, wait=True
        )

    async def delete(self, memory_ids: list[str]) -> None:
        if not memory_ids:
            return
        await self.ensure()
        await self._client.delete(
            self._collection,
            points_selector=models.PointIdsList(points=[point_id(m) for m in memory_ids]),
            wait=True,
        )

    async def vacuum(self) -> dict[str, object]:
        """Compact deleted points out of the server's segments, and wait until it has.

        A delete on a Qdrant server only marks points deleted; their vectors and payload stay in the
        segment files until the vacuum optimizer rebuilds the segment. So, after Forget's deletes: the
        collection's optimizer settings are (re)applied with a threshold any deletion passes
        (`compaction_config`), and that update is what makes the server run its optimizers now; then
        the collection is polled until its status is green (no optimization running or pending).
        Segments under `COMPACT_MIN_VECTORS` points are below Qdrant's vacuum bound (docs/operations.md).
        """
        await self.ensure()
        await self._client.update_collection(self._collection, optimizers_config=compaction_config())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + COMPACT_WAIT_SECONDS
        while True:
            info = await self._client.get_collection(self._collection)
            if info.status == models.CollectionStatus.GREEN:
                return {"status": "green", "segments": info.segments_count}
            if loop.time() >= deadline:
                raise CompactionTimeout(f"collection {self._collection} still {info.status} after compaction")
            await asyncio.sleep(COMPACT_POLL_SECONDS)

    async def present(self, memory_ids: list[str]) -> list[str]:
        if not memory_ids:
            return []
        await self.ensure()
        wanted = {point_id(m): m for m in memory_ids}
        records = await self._client.retrieve(self._collection, list(wanted), with_payload=False, with_vectors=False)
        found = {point_id(str(r.id)) for r in records}
        return [original for canonical, original in wanted.items() if canonical in found]

    async def search(
        self,
        *,
        dense: list[float],
        text: str,
        read_filter: ReadFilter,
        now_ts: float,
        limit: int,
        dense_weight: float = 1.0,
        sparse_weight: float = 1.0,
    ) -> list[Hit]:
        check_search_args(dense, self._dim, limit, dense_weight, sparse_weight)
        flt = qdrant_filter(read_filter, now_ts)
        if flt is None:
            return []
        await self.ensure()
        n = prefetch_limit(limit)
        prefetches: list[models.Prefetch] = []
        weights: list[float] = []
        if dense_weight > 0:
            prefetches.append(models.Prefetch(query=dense, using=DENSE, filter=flt, limit=n))
            weights.append(dense_weight)
        sparse = bm25_query(text) if sparse_weight > 0 else None
        if sparse is not None:
            query = models.SparseVector(indices=list(sparse.indices), values=list(sparse.values))
            # IDF counted over this tenant's points only: another tenant's corpus never moves our scores.
            tenant_corpus = models.Filter(
                must=[models.FieldCondition(key="tenant_id", match=models.MatchValue(value=read_filter.tenant_id))]
            )
            prefetches.append(
                models.Prefetch(
                    query=query,
                    using=SPARSE,
                    filter=flt,
                    limit=n,
                    params=models.SearchParams(idf=models.IdfCorpusParams(corpus=tenant_corpus)),
                )
            )
            weights.append(sparse_weight)
        if not prefetches:
            return []
        response = await self._client.query_points(
            self._collection,
            prefetch=prefetches,
            query=models.RrfQuery(rrf=models.Rrf(k=RRF_K, weights=weights)),
            limit=limit,
            with_payload=False,
            with_vectors=False,
        )
        return [Hit(memory_id=point_id(str(p.id)), score=float(p.score)) for p in response.points]

    async def nearest(self, *, dense: list[float], read_filter: ReadFilter, now_ts: float, limit: int) -> list[Hit]:
        check_search_args(dense, self._dim, limit, 1.0, 0.0)
        flt = qdrant_filter(read_filter, now_ts)
        if flt is None:
            return []
        await self.ensure()
        response = await self._client.query_points(
            self._collection,
            query=dense,
            using=DENSE,
            query_filter=flt,
            limit=limit,
            with_payload=False,
            with_vectors=False,
        )
        return [Hit(memory_id=point_id(str(p.id)), score=float(p.score)) for p in response.points]

    async def hybrid(
        self, *, dense: list[float], text: str, read_filter: ReadFilter, now_ts: float, limit: int
    ) -> HybridHits:
        check_search_args(dense, self._dim, limit, 1.0, 1.0)
        flt = qdrant_filter(read_filter, now_ts)
        if flt is None:
            return HybridHits(dense=[], sparse=[])
        await self.ensure()
        requests = [
            models.QueryRequest(
                query=dense, using=DENSE, filter=flt, limit=limit, with_payload=False, with_vector=False
            )
        ]
        sparse = bm25_query(text)
        if sparse is not None:
            requests.append(
                models.QueryRequest(
                    query=models.SparseVector(indices=list(sparse.indices), values=list(sparse.values)),
                    using=SPARSE,
                    filter=flt,
                    limit=limit,
                    # IDF over what this principal may read: no one else's memories move its scores.
                    params=models.SearchParams(idf=models.IdfCorpusParams(corpus=flt)),
                    with_payload=False,
                    with_vector=False,
                )
            )
        # One round trip for both retrievers.
        responses = await self._client.query_batch_points(self._collection, requests=requests)
        hits = [[Hit(memory_id=point_id(str(p.id)), score=float(p.score)) for p in r.points] for r in responses]
        return HybridHits(dense=hits[0], sparse=hits[1] if len(hits) > 1 else [])

    async def count(self) -> int:
        await self.ensure()
        result = await self._client.count(self._collection, exact=True)
        return result.count

    async def embedder(self) -> str | None:
        await self.ensure()
        metadata = (await self._client.get_collection(self._collection)).config.metadata or {}
        recorded = metadata.get(EMBEDDER_KEY)
        return str(recorded) if recorded else None

    async def record_embedder(self, model_id: str) -> None:
        await self.ensure()
        await self._client.update_collection(self._collection, metadata={EMBEDDER_KEY: model_id})

    async def health(self) -> bool:
        try:
            return await self._client.collection_exists(self._collection)
        except Exception:
            return False

    async def close(self) -> None:
        self._ready = False
        await self._client.close()
