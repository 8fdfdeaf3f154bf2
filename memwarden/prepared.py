"""The in-process tier of requests in flight: their CPU work starts before Temporal has started the workflow.

Why: in the embedded profile (`memwarden up`) the API and the worker share one process and
RetrieveWorkflow and RememberWorkflow start eagerly, so their local activity runs in this very
process. Embedding the query (~4 ms of MiniLM) or a candidate (~6 ms) used to wait until the
activity had read the parked text back from the store; now the API hands the text here as the
request arrives, a worker thread embeds it while the API parks the claim check and Temporal starts
the workflow, and the activity takes the vector from here instead of embedding again. The ids a
subject handle parks (a search's read filter, a write's owner and writer) are held here too, so the
activity need not read them back, and so is the write's park in flight, so the activity can wait
for it to land. Only embedding is done ahead: onnxruntime runs off the GIL, whereas the detectors
(pure Python) in a thread measured slower than inline, as they held the GIL against the event loop.

It is a cache, never the only copy: the claim check in the store is still written, so an
activity on another worker (eager start declined, production's separate API process) or a retried
attempt after this entry was taken reads the store and embeds for itself. Entries live only while
their request is in flight (the API discards them when the workflow ends), hold nothing but the
query and its vector in this process's memory, and never reach history, logs or spans.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from typing import TypeVar

from memwarden.embed import Embedder
from memwarden.records import ReadFilter

MAX_IN_FLIGHT = 1024
"""A bound on entries, in case a caller forgets to discard: the oldest goes first."""

V = TypeVar("V")


class PreparedRequests:
    """Query and candidate texts with their embeddings (computing in worker threads), by claim-check
    reference, the ids held under subject handles, and writes' parks in flight."""

    def __init__(self, embedder: Embedder, *, threads: int = 2, capacity: int = MAX_IN_FLIGHT) -> None:
        if threads < 1 or capacity < 1:
            raise ValueError("threads and capacity must be >= 1")
        self._embedder = embedder
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="mw-query-embed")
        self._capacity = capacity
        self._entries: dict[str, tuple[str, concurrent.futures.Future[list[float]]]] = {}
        self._subjects: dict[str, ReadFilter | dict[str, str | None]] = {}
        self._parking: dict[str, asyncio.Future[None]] = {}
        self._lock = threading.Lock()

    def _put(self, table: dict[str, V], ref: str, value: V) -> None:
        """Store under the lock, dropping the oldest entries past the capacity."""
        with self._lock:
            table[ref] = value
            while len(table) > self._capacity:
                table.pop(next(iter(table)))

    def _pop(self, table: dict[str, V], ref: str) -> V | None:
        with self._lock:
            return table.pop(ref, None)

    def prepare(self, ref: str, text: str) -> None:
        """Start embedding `text` (a search query or a write's content) for the claim check `ref`
        (returns at once)."""
        self._put(self._entries, ref, (text, self._pool.submit(self._embed_one, text)))

    async def take_candidate(self, ref: str, text: str) -> list[float] | None:
        """The vector for `ref`, removing the entry, if it was prepared from this very text (the store's
        claim check is the authority: an entry that disagrees is dropped unused); None when absent or
        its embedding failed (the caller embeds for itself, and reports a real failure from there)."""
        taken = await self.take(ref)
        return taken[1] if taken is not None and taken[0] == text else None

    def hold_parking(self, ref: str, parking: asyncio.Future[None]) -> None:
        """The claim check `ref` is being written beside the workflow start: the activity awaits `parking`
        before it reads the store (`parked`), so it never reads, nor drops, a row that has not landed."""
        self._put(self._parking, ref, parking)

    async def parked(self, ref: str) -> None:
        """Wait until the claim check `ref` held by `hold_parking` has landed (or failed to); at once when
        none is held here, or it was held on another event loop (the store's row then speaks alone)."""
        parking = self._pop(self._parking, ref)
        if parking is None or parking.get_loop() is not asyncio.get_running_loop():
            return
        with contextlib.suppress(Exception):  # a failed park shows as an absent claim check
            await asyncio.shield(parking)

    def hold_filter(self, ref: str, read_filter: ReadFilter) -> None:
        """Keep the read filter parked under subject handle `ref` here too, so the in-process activity
        need not wait for the store's copy (which is written beside the workflow start)."""
        self._put(self._subjects, ref, read_filter)

    def hold_ids(self, ref: str, ids: dict[str, str | None]) -> None:
        """Keep the ids a write's subject handle parks (owner, writer), for the in-process activity."""
        self._put(self._subjects, ref, dict(ids))

    def take_filter(self, ref: str) -> ReadFilter | None:
        """The read filter held for `ref`, removing it; None sends the caller to the store's handle."""
        held = self._pop(self._subjects, ref)
        return held if isinstance(held, ReadFilter) else None

    def take_ids(self, ref: str) -> dict[str, str | None] | None:
        """The ids held for write handle `ref`, removing them; None sends the caller to the store's handle."""
        held = self._pop(self._subjects, ref)
        return held if isinstance(held, dict) else None

    def _embed_one(self, text: str) -> list[float]:
        [vector] = self._embedder.embed([text])
        return vector

    async def take(self, ref: str) -> tuple[str, list[float]] | None:
        """The text and vector for `ref`, removing the entry; None when absent or its embedding failed.

        None sends the caller to the store's claim check, which is always there as well.
        """
        entry = self._pop(self._entries, ref)
        if entry is None:
            return None
        text, future = entry
        try:
            vector = await asyncio.wrap_future(future)
        except Exception:  # the activity embeds again itself and reports a real failure from there
            return None
        return text, vector

    def discard(self, ref: str) -> None:
        """Forget `ref` (idempotent); an embedding still running finishes and is dropped."""
        with self._lock:
            self._entries.pop(ref, None)
            self._subjects.pop(ref, None)
            self._parking.pop(ref, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def close(self) -> None:
        """Drop every entry and stop the threads (running embeddings finish first)."""
        with self._lock:
            self._entries.clear()
            self._subjects.clear()
            self._parking.clear()
        self._pool.shutdown(wait=True)
