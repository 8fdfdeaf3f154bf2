"""The synthetic bulk the latency benches load: other owners' memories, written past the gate.

Memories are bulk-loaded through the store (`SqlStore.bulk_insert_memories`), then the index's own
`upsert` (which computes Qdrant BM25 vectors), not through the write gate: 100k gated writes would
take hours here. The index is then optimised (Qdrant builds its HNSW and payload indexes), as a
running shard is. The tenant's memories belong to owners of `per_owner` memories each.

Vectors: a pool of 2,000 distinct synthetic sentences is embedded with the real MiniLM model; each
memory takes one pool sentence plus a unique tag, and that sentence's vector with a little noise
(renormalised), so no two points are identical.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from datetime import UTC, datetime, timedelta

import numpy as np

from bench.stack import Stack
from memwarden.records import MemoryRecord, MemoryType, SourceKind, Status, content_hash
from memwarden.stores.vectors import index_point
from memwarden.stores.vectors_edge import EdgeIndex

POOL = 2000
BATCH = 1000
SUBJECTS = (
    "the client",
    "my sister",
    "the team",
    "our landlord",
    "the dentist",
    "my manager",
    "the school",
    "a friend",
)
VERBS = ("moved", "prefers", "cancelled", "booked", "asked about", "forgot", "finished", "recommended")
OBJECTS = (
    "the quarterly report",
    "a window seat",
    "the cello lessons",
    "the harbour walk",
    "strong black coffee",
    "the blue pipeline",
    "a dentist appointment",
    "the spring budget",
    "a trip to Lisbon",
    "the new laptop",
    "the garden shed",
    "a vegetarian menu",
)
WHEN = ("on monday", "last week", "in march", "every morning", "after the holidays", "before friday", "tonight")


def sentence(rng: random.Random) -> str:
    return f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(WHEN)}"


def owner(i: int) -> str:
    return f"owner-{i}"


def sentence_pool(rng: random.Random) -> list[str]:
    """`POOL` distinct synthetic sentences (the bulk's texts, before their unique tags)."""
    return list(dict.fromkeys(sentence(rng) for _ in range(POOL * 3)))[:POOL]


async def pool_vectors(stack: Stack, pool: list[str]) -> np.ndarray:
    """The pool embedded once with the stack's real model."""
    return np.array(await asyncio.to_thread(stack.deps.embedder.embed, pool), dtype=np.float32)


async def bulk_load(
    stack: Stack,
    start: int,
    stop: int,
    per_owner: int,
    pool: list[str],
    vectors: np.ndarray,
    *,
    tenant: str,
    optimise: bool = True,
) -> None:
    """Memories start..stop-1 of `tenant`: rows through the store, points through the index (batches of
    1,000); then, unless `optimise` is False, the index optimised (`optimise_index`)."""
    rng = np.random.default_rng(start)
    now = datetime.now(UTC)
    for lo in range(start, stop, BATCH):
        hi = min(lo + BATCH, stop)
        records, dense = [], []
        for n in range(lo, hi):
            text = f"{pool[n % POOL]} (note {n})"
            created = now - timedelta(minutes=n % 100_000)
            records.append(
                MemoryRecord(
                    id=str(uuid.UUID(int=n + 1)),
                    tenant_id=tenant,
                    owner_id=owner(n // per_owner),
                    type=MemoryType.EPISODIC,
                    content=text,
                    content_hash=content_hash(text),
                    source_kind=SourceKind.USER,
                    reason="user_stated_fact",
                    importance=0.5,
                    status=Status.ACTIVE,
                    created_at=created,
                    updated_at=created,
                )
            )
            v = vectors[n % POOL] + rng.normal(0.0, 0.02, vectors.shape[1])
            dense.append((v / np.linalg.norm(v)).tolist())
        await stack.deps.store.bulk_insert_memories(records)
        await stack.deps.index.upsert([index_point(r, d) for r, d in zip(records, dense, strict=True)])
    if optimise:
        await optimise_index(stack)


async def optimise_index(stack: Stack) -> None:
    """Run Qdrant's optimizers on an Edge shard (HNSW and payload indexes built); other indexes do it themselves."""
    if isinstance(stack.deps.index, EdgeIndex):
        await stack.deps.index.vacuum()
