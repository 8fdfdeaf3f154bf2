"""The Sink protocol: every place a memory's data can live, and how Forget empties and checks it.

A sink is one deletion target: the vector index, the cache, summaries, each replica, the durable
store's content. Forget fans out to all of them in parallel; each `purge` is idempotent (a retried
activity finds less to do, never does harm), and each `verify_absent` reads back independently of
the purge, so a receipt records evidence, not intent. Lineage is ids and content-free cache
prefixes only: no sink ever needs the content or the person's id to forget them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol, runtime_checkable

from memwarden.embed import Embedder
from memwarden.records import LIVE_STATUSES, SinkEvidence
from memwarden.stores.cache import Cache
from memwarden.stores.forget import ForgetStore
from memwarden.stores.replicas import ReplicaStore
from memwarden.stores.sql import SqlStore
from memwarden.stores.summaries import (
    SUMMARY_SLOT,
    Summarizer,
    derive,
    purge_summary,
    summaries_touching,
)
from memwarden.stores.vectors import VectorIndex

_CHUNK = 500

VECTOR_INDEX = "vector_index"
CACHE = "cache"
SUMMARIES = "summaries"
STORE_CONTENT = "store_content"


@dataclass(frozen=True)
class Lineage:
    """What one deletion covers: memory ids and the cache prefixes their searches live under."""

    deletion_id: str
    tenant_id: str
    memory_ids: tuple[str, ...]
    cache_prefixes: tuple[str, ...]


@runtime_checkable
class Sink(Protocol):
    """One deletion target. `purge` returns how many items it removed; both calls are idempotent."""

    name: str
    method: str

    async def purge(self, lineage: Lineage) -> int: ...

    async def verify_absent(self, lineage: Lineage) -> SinkEvidence: ...


def _chunks(ids: Sequence[str]) -> list[list[str]]:
    return [list(ids[i : i + _CHUNK]) for i in range(0, len(ids), _CHUNK)]


class _Vacuum:
    """Single-flight vacuum: a caller needs *a vacuum that started after its delete*, not one of its own.

    Concurrent deletions then share one vacuum (it rebuilds whole segments, so one run is costly).
    """

    def __init__(self, index: VectorIndex) -> None:
        self.index = index
        self.lock = asyncio.Lock()
        self.started = 0
        self.finished = 0

    async def after_now(self) -> None:
        ticket = self.started + 1
        async with self.lock:
            if self.finished >= ticket:
                return
            self.started += 1
            number = self.started
            await self.index.vacuum()  # type: ignore[attr-defined]
            self.finished = number


class VectorIndexSink:
    """Points deleted by id, then the segments compacted (Qdrant Edge: vacuumed; a Qdrant server: its
    vacuum optimizer run and waited for) so deleted vectors and payloads are gone from its files."""

    name = VECTOR_INDEX

    def __init__(self, index: VectorIndex) -> None:
        self.index = index
        self.vacuums = hasattr(index, "vacuum")
        self.method = "delete_points+vacuum" if self.vacuums else "delete_points(wait=true)"
        self._vacuum = _Vacuum(index) if self.vacuums else None  # one sink per worker, so one per shard

    async def purge(self, lineage: Lineage) -> int:
        removed = 0
        for chunk in _chunks(lineage.memory_ids):
            present = await self.index.present(chunk)
            if present:
                await self.index.delete(present)
                removed += len(present)
        if self._vacuum is not None and lineage.memory_ids:
            # Always, even when nothing was left to delete: a retry after a crash between delete and
            # vacuum must still vacuum.
            await self._vacuum.after_now()
        return removed

    async def verify_absent(self, lineage: Lineage) -> SinkEvidence:
        left = 0
        for chunk in _chunks(lineage.memory_ids):
            left += len(await self.index.present(chunk))
        return SinkEvidence(
            sink=self.name,
            method="retrieve_by_id",
            absent=left == 0,
            checked=len(lineage.memory_ids),
            remaining=left,
            detail={"vacuumed": self.vacuums},
        )


class CacheSink:
    """Every cached search the deleted memories may have fed, by content-free key prefix."""

    name = CACHE
    method = "delete_prefix"

    def __init__(self, cache: Cache) -> None:
        self.cache = cache

    async def purge(self, lineage: Lineage) -> int:
        removed = 0
        for prefix in lineage.cache_prefixes:
            removed += await self.cache.delete_prefix(prefix)
        return removed

    async def verify_absent(self, lineage: Lineage) -> SinkEvidence:
        left = 0
        for prefix in lineage.cache_prefixes:
            left += len(await self.cache.keys_with_prefix(prefix))
        return SinkEvidence(
            sink=self.name,
            method="scan_prefix",
            absent=left == 0,
            checked=len(lineage.cache_prefixes),
            remaining=left,
        )


class StoreContentSink:
    """The durable store: content and content hash removed, the tombstone row kept; then compaction."""

    name = STORE_CONTENT

    def __init__(self, store: SqlStore) -> None:
        self.forget = ForgetStore(store)
        self.method = "null_content+" + ("wal_checkpoint" if store.dialect == "sqlite" else "vacuum")

    async def purge(self, lineage: Lineage) -> int:
        removed = await self.forget.purge_content(lineage.tenant_id, list(lineage.memory_ids))
        await self.forget.compact()
        return removed

    async def verify_absent(self, lineage: Lineage) -> SinkEvidence:
        left = await self.forget.content_remaining(lineage.tenant_id, list(lineage.memory_ids))
        compaction = await self.forget.compact(vacuum=False)
        return SinkEvidence(
            sink=self.name,
            method="select_content_is_null",
            absent=left == 0 and bool(compaction.get("complete")),
            checked=len(lineage.memory_ids),
            remaining=left,
            detail=compaction,
        )


class SummarySink:
    """Summaries whose lineage includes a forgotten id: re-derived from what remains, old versions purged."""

    name = SUMMARIES
    method = "rederive+purge_versions"

    def __init__(
        self, store: SqlStore, index: VectorIndex, embedder: Embedder, summarizer: Summarizer, max_chars: int
    ) -> None:
        self.store = store
        self.index = index
        self.embedder = embedder
        self.summarizer = summarizer
        self.max_chars = max_chars

    async def purge(self, lineage: Lineage) -> int:
        forgotten = set(lineage.memory_ids)
        now = datetime.now(UTC)
        purged = 0
        for summary, sources in await summaries_touching(self.store, lineage.tenant_id, lineage.memory_ids):
            if summary.content is None:
                continue
            if summary.id not in forgotten and summary.status in LIVE_STATUSES:
                remaining = [i for i in sources if i not in forgotten]
                records = await self.store.get_many(lineage.tenant_id, remaining)
                live = [
                    records[i]
                    for i in remaining
                    if i in records and records[i].status in LIVE_STATUSES and records[i].content
                ]
                live.sort(key=lambda r: (r.created_at, r.id), reverse=True)
                if live:
                    await derive(
                        self.store,
                        self.index,
                        self.embedder,
                        self.summarizer,
                        tenant_id=lineage.tenant_id,
                        owner_id=summary.owner_id,
                        sources=live,
                        max_chars=self.max_chars,
                        actor="system:forget",
                        now=now,
                        slot=summary.slot or SUMMARY_SLOT,
                    )
            if await purge_summary(self.store, lineage.tenant_id, summary.id, now):
                purged += 1
            await self.index.delete([summary.id])
        return purged

    async def verify_absent(self, lineage: Lineage) -> SinkEvidence:
        touching = await summaries_touching(self.store, lineage.tenant_id, lineage.memory_ids)
        holding = [s.id for s, _ in touching if s.content is not None]
        indexed = await self.index.present([s.id for s, _ in touching]) if touching else []
        left = len(holding) + len(indexed)
        return SinkEvidence(
            sink=self.name,
            method="lineage_scan+retrieve_by_id",
            absent=left == 0,
            checked=len(touching),
            remaining=left,
        )


class ReplicaSink:
    """One replica database: copies become tombstones (so a lagging copy cannot resurrect them)."""

    method = "tombstone_rows"

    def __init__(self, replica: ReplicaStore) -> None:
        self.replica = replica
        self.name = replica.name

    async def purge(self, lineage: Lineage) -> int:
        return await self.replica.tombstone(lineage.tenant_id, list(lineage.memory_ids), datetime.now(UTC))

    async def verify_absent(self, lineage: Lineage) -> SinkEvidence:
        holding, missing = await self.replica.content_remaining(lineage.tenant_id, list(lineage.memory_ids))
        return SinkEvidence(
            sink=self.name,
            method="select_content_is_null",
            absent=holding == 0 and missing == 0,
            checked=len(lineage.memory_ids),
            remaining=holding,
            detail={"without_tombstone": missing},
        )


class UnknownSink(KeyError):
    """A deletion names a sink this worker is not configured with (a replica removed from config)."""
