"""The search query's in-process tier: embedding starts before Temporal has started the workflow.

Why: in the embedded profile (`memwarden up`) the API and the worker share one process and
RetrieveWorkflow starts eagerly, so its local activity runs in this very process. Embedding the
query (~4 ms of MiniLM) used to wait until the activity had read the parked query back from the
store; now the API hands the text here as the request arrives, a worker thread embeds it while
the API parks the claim check and Temporal starts the workflow, and the activity takes text and
vector from here instead of reading the store and embedding again.

It is a cache, never the only copy: the claim check in the store is still written, so an
activity on another worker (eager start declined, production's separate API process) or a retried
attempt after this entry was taken reads the store and embeds for itself. Entries live only while
their request is in flight (the API discards them when the workflow ends), hold nothing but the
query and its vector in this process's memory, and never reach history, logs or spans.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

from memwarden.embed import Embedder
from memwarden.records import ReadFilter

MAX_IN_FLIGHT = 1024
"""A bound on entries, in case a caller forgets to discard: the oldest goes first."""


class PreparedQueries:
    """Query text and its embedding (computing in a worker thread), by claim-check reference."""

    def __init__(self, embedder: Embedder, *, threads: int = 2, capacity: int = MAX_IN_FLIGHT) -> None:
        if threads < 1 or capacity < 1:
            raise ValueError("threads and capacity must be >= 1")
        self._embedder = embedder
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="mw-query-embed")
        self._capacity = capacity
        self._entries: dict[str, tuple[str, concurrent.futures.Future[list[float]]]] = {}
        self._filters: dict[str, ReadFilter] = {}
        self._lock = threading.Lock()

    def prepare(self, ref: str, text: str) -> None:
        """Start embedding `text` for the claim check `ref` (returns at once)."""
        future = self._pool.submit(self._embed_one, text)
        with self._lock:
            self._entries[ref] = (text, future)
            while len(self._entries) > self._capacity:
                self._entries.pop(next(iter(self._entries)))

    def hold_filter(self, ref: str, read_filter: ReadFilter) -> None:
        """Keep the read filter parked under subject handle `ref` here too, so the in-process activity
        need not wait for the store's copy (which is written beside the workflow start)."""
        with self._lock:
            self._filters[ref] = read_filter
            while len(self._filters) > self._capacity:
                self._filters.pop(next(iter(self._filters)))

    def take_filter(self, ref: str) -> ReadFilter | None:
        """The read filter held for `ref`, removing it; None sends the caller to the store's handle."""
        with self._lock:
            return self._filters.pop(ref, None)

    def _embed_one(self, text: str) -> list[float]:
        [vector] = self._embedder.embed([text])
        return vector

    async def take(self, ref: str) -> tuple[str, list[float]] | None:
        """The text and vector for `ref`, removing the entry; None when absent or its embedding failed.

        None sends the caller to the store's claim check, which is always there as well.
        """
        with self._lock:
            entry = self._entries.pop(ref, None)
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
            self._filters.pop(ref, None)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def close(self) -> None:
        """Drop every entry and stop the threads (running embeddings finish first)."""
        with self._lock:
            self._entries.clear()
            self._filters.clear()
        self._pool.shutdown(wait=True)
