"""`last_used_at` without slowing the read: searches note what they returned; one task writes it in batches.

Why batched and off the request: every search returning memories would otherwise open a write
transaction (SQLite's single writer lock; a row update on PostgreSQL) in the read path. The
recorder keeps the latest use per memory in memory and writes them at most once per `interval`,
so a burst of searches costs one UPDATE per tenant. A crash loses at most `interval` of use
timestamps, which only ever feed recency ranking and retention (never authorization).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import defaultdict
from datetime import datetime

from memwarden.stores.sql import SqlStore

log = logging.getLogger("memwarden.api.usage")


class LastUsedRecorder:
    """Collects (tenant, memory id) -> last use and flushes them to the store in the background."""

    def __init__(self, store: SqlStore, *, interval: float = 1.0) -> None:
        self._store = store
        self._interval = interval
        self._pending: dict[str, dict[str, datetime]] = defaultdict(dict)
        self._task: asyncio.Task[None] | None = None
        self._writing = 0

    def record(self, tenant: str, ids: list[str], at: datetime) -> None:
        """Note a use; returns at once (the write happens later, in the recorder's task)."""
        if not ids:
            return
        batch = self._pending[tenant]
        for memory_id in ids:
            if batch.get(memory_id) is None or batch[memory_id] < at:
                batch[memory_id] = at
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())

    @property
    def pending(self) -> int:
        """Uses noted but not yet written (including those being written right now)."""
        return sum(len(b) for b in self._pending.values()) + self._writing

    async def _run(self) -> None:
        while self._pending:
            await asyncio.sleep(self._interval)
            await self.flush()

    async def flush(self) -> None:
        """Write everything noted so far (one UPDATE per tenant and timestamp); failures are logged, ids count only."""
        pending, self._pending = self._pending, defaultdict(dict)
        self._writing += sum(len(b) for b in pending.values())
        try:
            await self._write(pending)
        finally:
            self._writing -= sum(len(b) for b in pending.values())

    async def _write(self, pending: dict[str, dict[str, datetime]]) -> None:
        for tenant, batch in pending.items():
            by_time: dict[datetime, list[str]] = defaultdict(list)
            for memory_id, at in batch.items():
                by_time[at].append(memory_id)
            for at, ids in by_time.items():
                try:
                    await self._store.touch_last_used(tenant, ids, at)
                except Exception as exc:
                    log.warning("last_used_at update failed for %d memories: %s", len(ids), type(exc).__name__)

    async def close(self) -> None:
        """Stop the task and write what is left."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.flush()
