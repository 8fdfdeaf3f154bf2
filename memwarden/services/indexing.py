"""How the index catches up with the store (records become points through `vectors.index_point`), and
whether it is up.

The index is a derivative of the durable store: it carries the filter payload and vectors of each live
memory, never its content as payload, and whatever it lost (a crash before the Edge shard's group
flush) is rebuilt from the store, which never loses a committed write.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from memwarden.embed import Embedder
from memwarden.records import ELIGIBLE_STATUSES, FORGOTTEN_STATUSES, Status
from memwarden.services.deps import Deps
from memwarden.stores.sql import SqlStore
from memwarden.stores.vectors import VectorIndex, index_point

RECONCILE_MARGIN = timedelta(seconds=5)
"""Reach back this much further than the last flush: a commit stamps `updated_at` just before it indexes."""


async def reconcile_index(store: SqlStore, index: VectorIndex, embedder: Embedder, since: datetime) -> int:
    """Re-apply to the index every memory change since `since`; returns how many memories were touched.

    Live memories are (re)upserted, others get their status (ineligible at once), tombstoned and purged
    ones are deleted. Idempotent: applying a change the index already holds changes nothing.
    """
    touched = 0
    async for batch in store.changed_since(since - RECONCILE_MARGIN):
        live = [r for r in batch if r.status in ELIGIBLE_STATUSES and r.content is not None]
        if live:
            dense = await asyncio.to_thread(embedder.embed, [r.content or "" for r in live])
            await index.upsert([index_point(r, d) for r, d in zip(live, dense, strict=True)])
        gone = [r.id for r in batch if r.status in FORGOTTEN_STATUSES]
        await index.delete(gone)
        others: dict[Status, list[str]] = {}
        for r in batch:
            if r.status not in ELIGIBLE_STATUSES and r.status not in FORGOTTEN_STATUSES:
                others.setdefault(r.status, []).append(r.id)
        for status, ids in others.items():
            await index.set_status(ids, status)
        touched += len(batch)
    return touched


EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


async def adopt_embedder(store: SqlStore, index: VectorIndex, embedder: Embedder) -> int:
    """Make the index hold `embedder`'s vectors; returns how many memories were re-embedded (0: none needed).

    An index records whose vectors it holds. When that is another embedder (or nothing, on an index that
    already has points: one built before the record existed), every memory in the store is applied to it
    again with this embedder, and only then is the new embedder recorded, so a crash during the rebuild
    repeats it on the next start instead of leaving two embedders' vectors side by side.
    """
    recorded = await index.embedder()
    if recorded == embedder.model_id:
        return 0
    touched = 0
    if recorded is not None or await index.count() > 0:
        touched = await reconcile_index(store, index, embedder, EPOCH)
    await index.record_embedder(embedder.model_id)
    return touched


async def index_health(deps: Deps) -> bool:
    """Whether the worker's index answers (the health workflow's probe of this worker's index)."""
    return await deps.index.health()
