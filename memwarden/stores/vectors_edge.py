"""Qdrant Edge: the Qdrant engine in-process, one shard directory, for the embedded profile.

Only the worker opens the shard (one process). Edge calls are synchronous and run in worker
threads; writes, open, close, flush and vacuum are serialised by one lock. The shard runs without a
write-ahead log (a WAL would keep a copy of a forgotten memory's vectors after it was deleted and
vacuumed), so durability is a flush, and a flush is a burst of fsyncs during which Edge holds the GIL:
- deletions are flushed before they return (a purge that is verified must be on disk);
- upserts and status changes are visible to queries at once and flushed together within
  `flush_delay` (group flush; the service passes `edge_flush_delay_seconds`, 5 s), and the time each
  flush started is recorded beside the shard, so after a crash the worker re-indexes from the durable
  store whatever changed since then (`memwarden.services.indexing.reconcile_index`): the store is the source of
  truth, the index a derivative.
Vacuum runs in a child process on the closed shard (`edge_vacuum`: Edge's optimizer holds the GIL for
its whole run); reads wait for it at a gate instead of meeting a closed shard.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

from qdrant_edge import (
    CountRequest,
    Distance,
    EdgeConfig,
    EdgeOptimizersConfig,
    EdgeShard,
    EdgeSparseVectorParams,
    EdgeVectorParams,
    FieldCondition,
    Filter,
    Fusion,
    HasIdCondition,
    IdfParams,
    IntegerIndexParams,
    IsEmptyCondition,
    KeywordIndexParams,
    MatchAny,
    MatchValue,
    Modifier,
    PayloadSchemaType,
    Point,
    Prefetch,
    Query,
    QueryRequest,
    RangeFloat,
    SearchParams,
    UpdateOperation,
)

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
    IndexUnavailable,
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


def edge_filter(read_filter: ReadFilter, now_ts: float) -> Filter | None:
    """ReadFilter -> Qdrant Edge filter; None means "admits nothing" (do not query at all)."""
    if matches_nothing(read_filter):
        return None
    must: list = [
        FieldCondition("tenant_id", match=MatchValue(read_filter.tenant_id)),
        FieldCondition("status", match=MatchAny([s.value for s in read_filter.statuses])),
    ]
    if read_filter.types is not None:
        must.append(FieldCondition("type", match=MatchAny([t.value for t in read_filter.types])))
    must.append(
        FieldCondition("sensitivity_rank", range=RangeFloat(lte=float(sensitivity_rank(read_filter.max_sensitivity))))
    )
    must.append(
        Filter(should=[IsEmptyCondition("expires_at_ts"), FieldCondition("expires_at_ts", range=RangeFloat(gt=now_ts))])
    )
    must.append(Filter(should=[_clause_filter(c) for c in satisfiable_clauses(read_filter)]))
    return Filter(must=must)


def _clause_filter(clause: NamespaceClause) -> Filter:
    must: list = [FieldCondition("scope", match=MatchValue(clause.scope.value))]
    if clause.owner_ids is not None:
        must.append(FieldCondition("owner_id", match=MatchAny(list(clause.owner_ids))))
    if clause.agent_id is not None:
        must.append(FieldCondition("agent_id", match=MatchValue(clause.agent_id)))
    if clause.stores is not None:
        must.append(FieldCondition("store", match=MatchAny(list(clause.stores))))
    return Filter(must=must)


FLUSH_DELAY_S = 0.5
"""How long an upsert may wait for the group flush when the caller names none (tests, tools); the service
passes `edge_flush_delay_seconds` (5 s). A crash loses at most this much, and reconcile repairs it."""
FLUSHED_AT_FILE = "memwarden_flushed_at"
EMBEDDER_FILE = "memwarden_embedder"


def _memory_id(point_id: object) -> str:
    """Edge answers ids as `uuid.UUID` already; only other forms are parsed (a search maps hundreds)."""
    return str(point_id) if isinstance(point_id, uuid.UUID) else str(uuid.UUID(str(point_id)))


def _hits(points: list) -> list[Hit]:
    return [Hit(memory_id=_memory_id(p.id), score=float(p.score)) for p in points]


def _config(dim: int) -> EdgeConfig:
    return EdgeConfig(
        vectors={DENSE: EdgeVectorParams(size=dim, distance=Distance.Cosine)},
        sparse_vectors={SPARSE: EdgeSparseVectorParams(modifier=Modifier.Idf)},
        # Vacuum any segment holding a deleted point, so `vacuum()` really drops forgotten data.
        optimizers=EdgeOptimizersConfig(deleted_threshold=0.0001, vacuum_min_vector_number=1),
        wal_enabled=False,
    )


def _index_schemas() -> dict[str, object]:
    schemas: dict[str, object] = {f: PayloadSchemaType.Keyword for f in KEYWORD_FIELDS}
    schemas[TENANT_FIELD] = KeywordIndexParams(is_tenant=True)
    schemas.update({f: IntegerIndexParams(lookup=True, range=True) for f in INTEGER_FIELDS})
    schemas.update({f: PayloadSchemaType.Float for f in FLOAT_FIELDS})
    return schemas


class EdgeIndex:
    """A `VectorIndex` on a Qdrant Edge shard at `path` (created on first `ensure`)."""

    def __init__(self, path: Path, *, dim: int = DENSE_DIM, flush_delay: float = FLUSH_DELAY_S) -> None:
        self._path = Path(path)
        self._dim = dim
        self._shard: EdgeShard | None = None
        self._lock = asyncio.Lock()
        self._flush_delay = flush_delay
        self._dirty = False
        self._flusher: asyncio.Task[None] | None = None
        self._flush_started = False
        self._gate = asyncio.Lock()  # held by vacuum while the shard is closed; readers pass through it
        self._readers = 0
        self._no_readers = asyncio.Event()
        self._no_readers.set()

    @property
    def flushed_through(self) -> datetime | None:
        """Every write that finished before this time is on disk (None: nothing recorded, e.g. a new shard)."""
        try:
            return datetime.fromisoformat((self._path / FLUSHED_AT_FILE).read_text().strip())
        except (OSError, ValueError):
            return None

    async def ensure(self) -> None:
        if self._shard is not None:
            return
        async with self._lock:
            if self._shard is None:
                self._shard = await asyncio.to_thread(self._open)

    def _open(self) -> EdgeShard:
        config = _config(self._dim)
        try:
            if (self._path / "edge_config.json").exists():
                shard = EdgeShard.load(str(self._path), config)
            else:
                shard = EdgeShard.create(str(self._path), config)
        except Exception as exc:
            raise IndexUnavailable(f"cannot open the Edge shard at {self._path}: {exc}") from exc
        existing = set(shard.info().payload_schema)
        for field, schema in _index_schemas().items():
            if field not in existing:
                shard.update(UpdateOperation.create_field_index(field, schema))
        shard.flush()
        marker = self._path / FLUSHED_AT_FILE
        if not marker.exists():  # no flush recorded: every write so far was just flushed above
            marker.write_text(datetime.now(UTC).isoformat())
        return shard

    async def _ready(self) -> EdgeShard:
        await self.ensure()
        assert self._shard is not None
        return self._shard

    @contextlib.asynccontextmanager
    async def _reading(self) -> AsyncIterator[EdgeShard]:
        """A shard to read from, never one that a vacuum is about to close under us."""
        async with self._gate:
            pass
        self._readers += 1  # no await since the gate: a vacuum cannot slip in between
        self._no_readers.clear()
        try:
            yield await self._ready()
        finally:
            self._readers -= 1
            if self._readers == 0:
                self._no_readers.set()

    async def _write(self, operation: UpdateOperation, *, durable: bool = False) -> None:
        await self.ensure()
        async with self._lock:
            shard = self._shard  # read under the lock: a vacuum may have closed and reopened it meanwhile
            assert shard is not None
            await asyncio.to_thread(shard.update, operation)
            self._dirty = True
            if durable:
                await self._flush_locked(shard)
            elif self._flusher is None or self._flusher.done():
                self._flush_started = False
                self._flusher = asyncio.create_task(self._flush_later())

    async def _flush_later(self) -> None:
        await asyncio.sleep(self._flush_delay)
        self._flush_started = True
        await self.flush()

    async def _flush_locked(self, shard: EdgeShard) -> None:
        started = datetime.now(UTC)
        self._dirty = False
        try:
            await asyncio.to_thread(shard.flush)
        except BaseException:
            self._dirty = True
            raise
        (self._path / FLUSHED_AT_FILE).write_text(started.isoformat())

    async def flush(self) -> None:
        """Put every write made so far on disk (the group flush does this within `flush_delay` anyway)."""
        async with self._lock:
            if self._shard is not None and self._dirty:
                await self._flush_locked(self._shard)

    async def upsert(self, points: list[IndexPoint]) -> None:
        if not points:
            return
        edge_points = []
        for p in points:
            check_dim(p.memory_id, p.dense, self._dim)
            vector: dict = {DENSE: p.dense}
            sparse = bm25_document(p.text)
            if sparse is not None:
                vector[SPARSE] = sparse
            edge_points.append(Point(point_id(p.memory_id), vector, payload_of(p)))
        await self._write(UpdateOperation.upsert_points(edge_points))

    async def set_status(self, memory_ids: list[str], status: Status) -> None:
        if not memory_ids:
            return
        # By filter, not by id list: an id the shard no longer holds is skipped, not an error.
        selector = Filter(must=[HasIdCondition({point_id(m) for m in memory_ids})])
        await self._write(UpdateOperation.set_payload_by_filter(selector, {"status": Status(status).value}))

    async def delete(self, memory_ids: list[str]) -> None:
        if not memory_ids:
            return
        await self._write(UpdateOperation.delete_points([point_id(m) for m in memory_ids]), durable=True)

    async def present(self, memory_ids: list[str]) -> list[str]:
        if not memory_ids:
            return []
        wanted = {point_id(m): m for m in memory_ids}
        async with self._reading() as shard:
            records = await asyncio.to_thread(shard.retrieve, list(wanted), False, False)
        found = {str(uuid.UUID(str(r.id))) for r in records}
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
        flt = edge_filter(read_filter, now_ts)
        if flt is None:
            return []
        n = prefetch_limit(limit)
        prefetches: list[Prefetch] = []
        weights: list[float] = []
        if dense_weight > 0:
            prefetches.append(Prefetch(limit=n, query=Query.Nearest(dense, using=DENSE), filter=flt))
            weights.append(dense_weight)
        sparse = bm25_query(text) if sparse_weight > 0 else None
        if sparse is not None:
            # IDF counted over this tenant's points only: another tenant's corpus never moves our scores.
            tenant_corpus = Filter(must=[FieldCondition("tenant_id", match=MatchValue(read_filter.tenant_id))])
            prefetches.append(
                Prefetch(
                    limit=n,
                    query=Query.Nearest(sparse, using=SPARSE),
                    filter=flt,
                    params=SearchParams(idf=IdfParams(corpus=tenant_corpus)),
                )
            )
            weights.append(sparse_weight)
        if not prefetches:
            return []
        request = QueryRequest(
            limit=limit,
            prefetches=prefetches,
            query=Fusion.Rrf(k=RRF_K, weights=weights),
            with_payload=False,
            with_vector=False,
        )
        async with self._reading() as shard:
            scored = await asyncio.to_thread(shard.query, request)
        return _hits(scored)

    async def nearest(self, *, dense: list[float], read_filter: ReadFilter, now_ts: float, limit: int) -> list[Hit]:
        check_search_args(dense, self._dim, limit, 1.0, 0.0)
        flt = edge_filter(read_filter, now_ts)
        if flt is None:
            return []
        request = QueryRequest(
            limit=limit, query=Query.Nearest(dense, using=DENSE), filter=flt, with_payload=False, with_vector=False
        )
        async with self._reading() as shard:
            scored = await asyncio.to_thread(shard.query, request)
        return _hits(scored)

    async def hybrid(
        self, *, dense: list[float], text: str, read_filter: ReadFilter, now_ts: float, limit: int
    ) -> HybridHits:
        check_search_args(dense, self._dim, limit, 1.0, 1.0)
        flt = edge_filter(read_filter, now_ts)
        if flt is None:
            return HybridHits(dense=[], sparse=[])
        shard = await self._ready()
        dense_request = QueryRequest(
            limit=limit, query=Query.Nearest(dense, using=DENSE), filter=flt, with_payload=False, with_vector=False
        )
        sparse = bm25_query(text)
        sparse_request = None
        if sparse is not None:
            sparse_request = QueryRequest(
                limit=limit,
                query=Query.Nearest(sparse, using=SPARSE),
                filter=flt,
                # IDF over what this principal may read: no one else's memories move its scores.
                params=SearchParams(idf=IdfParams(corpus=flt)),
                with_payload=False,
                with_vector=False,
            )

        def run() -> tuple[list, list]:
            # One thread hop for both queries: the shard answers each in well under a millisecond.
            return shard.query(dense_request), (shard.query(sparse_request) if sparse_request else [])

        dense_points, sparse_points = await asyncio.to_thread(run)
        return HybridHits(dense=_hits(dense_points), sparse=_hits(sparse_points))

    async def count(self) -> int:
        async with self._reading() as shard:
            return await asyncio.to_thread(shard.count, CountRequest(exact=True))

    async def embedder(self) -> str | None:
        try:
            return (self._path / EMBEDDER_FILE).read_text().strip() or None
        except OSError:
            return None

    async def record_embedder(self, model_id: str) -> None:
        await self.ensure()
        staged = self._path / f"{EMBEDDER_FILE}.tmp"
        staged.write_text(model_id)
        staged.replace(self._path / EMBEDDER_FILE)  # a crash leaves the old record or the new, never half

    async def health(self) -> bool:
        shard = self._shard
        if shard is None:
            return self._gate.locked()  # closed only for a vacuum in progress: healthy, just busy
        try:
            await asyncio.to_thread(shard.count, CountRequest(exact=False))
        except Exception:
            return False
        return True

    async def vacuum(self) -> None:
        """Physically remove deleted points from the segment files, in a child process.

        Writes wait on the lock and reads at the gate meanwhile (about a second at 10k points); the
        rest of this process keeps running, which an in-process `optimize()` (it holds the GIL) would not.
        """
        await self.ensure()
        async with self._gate, self._lock:
            await self._no_readers.wait()
            shard = self._shard
            assert shard is not None
            self._dirty = True
            await self._flush_locked(shard)  # everything so far on disk, so the child sees it
            self._shard = None
            await asyncio.to_thread(shard.close)
            try:
                child = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-m",
                    "memwarden.stores.edge_vacuum",
                    str(self._path),
                    str(self._dim),
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.PIPE,
                )
                _, err = await child.communicate()
            finally:
                self._shard = await asyncio.to_thread(self._open)
            if child.returncode != 0:
                tail = err.decode(errors="replace").strip().splitlines()[-1:] or ["no output"]
                raise IndexUnavailable(f"vacuum of the Edge shard failed ({child.returncode}): {tail[0]}")

    async def close(self) -> None:
        if self._flusher is not None and not self._flusher.done():
            if self._flush_started:  # cancelling now would leave its flush thread running on the shard
                with contextlib.suppress(Exception):
                    await self._flusher
            else:  # still waiting out the delay: the flush below does its work
                self._flusher.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._flusher
        async with self._lock:
            if self._shard is not None and self._dirty:
                await self._flush_locked(self._shard)
            shard, self._shard = self._shard, None
            if shard is not None:
                await asyncio.to_thread(shard.close)
