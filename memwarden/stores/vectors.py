"""The vector index: one contract, two engines (Qdrant Edge in-process, a Qdrant server via qdrant-client).

The index is a derivative of the durable store. Each point is one memory (point id = memory id) with
a dense MiniLM vector, a BM25 sparse vector computed in-process by `qdrant_edge.Bm25` (Qdrant's own
tokenizer, stemmer and stop words; the IDF modifier is applied by the engine at query time, with
document frequencies counted over the searching tenant's points only), and a payload holding only
what the read filter needs. The memory's text is never stored in the index.

Authorization happens inside the query: `search` translates a `ReadFilter` into a Qdrant filter and
puts it inside *each* prefetch (dense and sparse), so a point the principal may not read is never a
candidate, however similar it is. `search` fuses inside the engine by Qdrant's weighted reciprocal
rank fusion (`Hit.score` is rank-based); `hybrid` returns both retrievers' real scores instead, which
Retrieve fuses with tuned weights and floors in `memwarden.policy.ranking`.
"""

from __future__ import annotations

import threading
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from qdrant_edge import Bm25, Bm25Config, SparseVector

from memwarden.records import Hit, IndexPoint, MemoryRecord, NamespaceClause, ReadFilter, Status, sensitivity_rank

if TYPE_CHECKING:
    from collections.abc import Sequence

DENSE = "dense"
SPARSE = "bm25"
DENSE_DIM = 384

KEYWORD_FIELDS = ("tenant_id", "owner_id", "scope", "agent_id", "store", "type", "status")
INTEGER_FIELDS = ("sensitivity_rank",)
FLOAT_FIELDS = ("expires_at_ts", "created_at_ts")
TENANT_FIELD = "tenant_id"

RRF_K = 2
"""Qdrant's default RRF constant; set explicitly so both engines fuse identically."""
PREFETCH_FACTOR = 4
MIN_PREFETCH = 20


@runtime_checkable
class VectorIndex(Protocol):
    """What the Retrieve, Remember and Forget activities need from a vector index."""

    async def ensure(self) -> None:
        """Create the collection (or shard) and its payload indexes if absent; safe to repeat."""
        ...

    async def upsert(self, points: list[IndexPoint]) -> None:
        """Insert or replace points by memory id (idempotent); the text only feeds BM25."""
        ...

    async def set_status(self, memory_ids: list[str], status: Status) -> None:
        """Change the status payload so search excludes or re-admits the points at once."""
        ...

    async def delete(self, memory_ids: list[str]) -> None:
        """Remove points (idempotent: missing ids are fine)."""
        ...

    async def present(self, memory_ids: list[str]) -> list[str]:
        """The subset of ids that still exist: how Forget verifies this sink."""
        ...

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
        """Hybrid search with the read filter inside every prefetch, fused by weighted RRF."""
        ...

    async def nearest(self, *, dense: list[float], read_filter: ReadFilter, now_ts: float, limit: int) -> list[Hit]:
        """Dense-only search whose `Hit.score` is the cosine similarity: for dedupe and relevance floors."""
        ...

    async def hybrid(
        self, *, dense: list[float], text: str, read_filter: ReadFilter, now_ts: float, limit: int
    ) -> HybridHits:
        """Both retrievers' candidates with their *real* scores, each filtered inside its own query.

        Dense scores are cosine similarities; BM25 scores use IDF counted over the points this read
        filter admits (the principal's own namespaces), so neither another tenant nor another person
        in the same tenant moves them. For score fusion and the relevance floor in `policy.ranking`.
        """
        ...

    async def count(self) -> int:
        """Exact number of points held."""
        ...

    async def embedder(self) -> str | None:
        """The embedder (`Embedder.model_id`) whose vectors this index holds; None when none was recorded."""
        ...

    async def record_embedder(self, model_id: str) -> None:
        """Record whose vectors this index holds: after a rebuild with that embedder, or on an empty index."""
        ...

    async def health(self) -> bool:
        """Whether the index answers queries now (never raises)."""
        ...

    async def close(self) -> None:
        """Release the engine; pending writes are flushed first."""
        ...


@dataclass(frozen=True)
class HybridHits:
    """The dense and the BM25 candidates of one query, best first, each with its engine's own score."""

    dense: list[Hit]
    sparse: list[Hit]


class IndexUnavailable(RuntimeError):
    """The index cannot be opened or is not configured (carries no memory content)."""


_bm25: Bm25 | None = None
_bm25_lock = threading.Lock()


def bm25() -> Bm25:
    """The process-wide BM25 model (English: stemming, stop words), shared by both engines."""
    global _bm25
    if _bm25 is None:
        with _bm25_lock:
            if _bm25 is None:
                _bm25 = Bm25(Bm25Config(language="english"))
    return _bm25


def bm25_document(text: str) -> SparseVector | None:
    """Term-frequency weights of a memory's text, or None when no token survives (all stop words)."""
    vector = bm25().embed_document(text)
    return vector if vector.indices else None


def bm25_query(text: str) -> SparseVector | None:
    """Query-side BM25 vector (each unique token 1.0), or None when the query has no usable token."""
    vector = bm25().embed_query(text)
    return vector if vector.indices else None


def point_id(memory_id: str) -> str:
    """Canonical uuid string: Qdrant accepts only uuids or integers as point ids."""
    return str(uuid.UUID(memory_id))


def payload_of(point: IndexPoint) -> dict[str, Any]:
    """The filterable fields of a point, and nothing else: never the text.

    Absent optional values are omitted, which Qdrant's `is_empty` matches (used for "no expiry").
    """
    payload: dict[str, Any] = {
        "tenant_id": point.tenant_id,
        "owner_id": point.owner_id,
        "scope": point.scope.value,
        "type": point.type.value,
        "status": point.status.value,
        "sensitivity_rank": point.sensitivity_rank,
        "created_at_ts": point.created_at_ts,
        "importance": point.importance,
    }
    if point.agent_id is not None:
        payload["agent_id"] = point.agent_id
    if point.store is not None:
        payload["store"] = point.store
    if point.expires_at_ts is not None:
        payload["expires_at_ts"] = point.expires_at_ts
    return payload


def satisfiable_clauses(read_filter: ReadFilter) -> list[NamespaceClause]:
    """Clauses that can match something; an empty allow-list (`owner_ids=()`) matches nothing."""
    return [c for c in read_filter.clauses if c.owner_ids != () and c.stores != ()]


def matches_nothing(read_filter: ReadFilter) -> bool:
    """True when the filter admits no point at all, so the engine is not asked.

    Sending an empty `should` to Qdrant would match *everything*, hence this short-circuit.
    """
    return not satisfiable_clauses(read_filter) or not read_filter.statuses or read_filter.types == ()


def prefetch_limit(limit: int) -> int:
    """Candidates each retriever contributes to fusion."""
    return max(limit * PREFETCH_FACTOR, MIN_PREFETCH)


def check_dim(memory_id: str, dense: Sequence[float], dim: int) -> None:
    """Refuse a vector of the wrong size before it reaches the engine (the error names the id only)."""
    if len(dense) != dim:
        raise ValueError(f"point {memory_id}: dense vector has {len(dense)} dimensions, expected {dim}")


def check_search_args(dense: Sequence[float], dim: int, limit: int, dense_weight: float, sparse_weight: float) -> None:
    if len(dense) != dim:
        raise ValueError(f"dense vector has {len(dense)} dimensions, the index expects {dim}")
    if limit < 1:
        raise ValueError("limit must be >= 1")
    if dense_weight < 0 or sparse_weight < 0 or dense_weight + sparse_weight == 0:
        raise ValueError("weights must be >= 0 and not both 0")


def index_point(record: MemoryRecord, dense: list[float]) -> IndexPoint:
    """The index's view of a record: filter payload plus vectors, never the content as payload."""
    assert record.content is not None
    return IndexPoint(
        memory_id=record.id,
        tenant_id=record.tenant_id,
        owner_id=record.owner_id,
        scope=record.scope,
        agent_id=record.agent_id,
        store=record.store,
        type=record.type,
        status=record.status,
        sensitivity_rank=sensitivity_rank(record.sensitivity),
        expires_at_ts=record.expires_at.timestamp() if record.expires_at else None,
        created_at_ts=record.created_at.timestamp(),
        importance=record.importance,
        dense=dense,
        text=record.content,
    )
