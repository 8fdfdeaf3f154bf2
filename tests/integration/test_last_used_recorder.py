"""The last-use recorder: searches note uses at no cost; one background task writes them in batches."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from api.usage import LastUsedRecorder
from memwarden.records import MemoryRecord, MemoryType, SourceKind, content_hash
from memwarden.stores.sql import SqlStore


def record(tenant: str) -> MemoryRecord:
    now = datetime.now(UTC)
    return MemoryRecord(
        id=str(uuid.uuid4()),
        tenant_id=tenant,
        owner_id="alice",
        type=MemoryType.FACT,
        content="synthetic",
        content_hash=content_hash("synthetic"),
        source_kind=SourceKind.USER,
        reason="user_stated_fact",
        created_at=now,
        updated_at=now,
    )


async def test_uses_are_batched_latest_wins_and_flushed_on_close(tmp_path: Path) -> None:
    store = await SqlStore.open(f"sqlite+aiosqlite:///{tmp_path / 'm.db'}")
    await store.migrate()
    try:
        a, b, other = record("t1"), record("t1"), record("t2")
        await store.bulk_insert_memories([a, b, other])
        recorder = LastUsedRecorder(store, interval=0.2)
        t0 = datetime.now(UTC)
        later = t0 + timedelta(seconds=5)
        recorder.record("t1", [a.id, b.id], later)
        recorder.record("t1", [a.id], t0)  # an older use never overwrites a newer one
        recorder.record("t2", [a.id, other.id], t0)  # a's id under another tenant touches nothing of t1
        assert recorder.pending == 4
        # nothing is written in the caller's path
        assert (await store.get_memory("t1", a.id)).last_used_at is None  # type: ignore[union-attr]
        for _ in range(50):
            await asyncio.sleep(0.05)
            if recorder.pending == 0:
                break
        assert recorder.pending == 0, "the background flush did not run"
        got = await store.get_many("t1", [a.id, b.id])
        assert got[a.id].last_used_at == later and got[b.id].last_used_at == later
        assert (await store.get_memory("t2", other.id)).last_used_at == t0  # type: ignore[union-attr]
        # close writes what is still pending, even before the interval passed
        recorder = LastUsedRecorder(store, interval=60)
        recorder.record("t1", [b.id], later + timedelta(seconds=1))
        await recorder.close()
        assert (await store.get_memory("t1", b.id)).last_used_at == later + timedelta(seconds=1)  # type: ignore[union-attr]
    finally:
        await store.close()
