"""The in-process tier of requests in flight: their CPU work starts before Temporal has started the workflow.

Why: in the embedded profile (`memwarden up`) the API and the worker share one process and
RetrieveWorkflow and RememberWorkflow start eagerly, so their local activity runs in this very
process. Embedding the query (~4 ms of MiniLM) or a candidate (~6 ms) used to wait until the
activity had read the parked text back from the store; now the API hands the text here as the
request arrives, a worker thread embeds it while the API parks the claim check and Temporal starts
the workflow, and the activity takes the vector from here instead of embedding again. The ids a
subject handle parks (a search's read filter, a write's owner and writer) are held here too, so the
activity need not read them back, and so is the write's park in flight, so the activity can wait
for it to land. Only embedding is done ahead in a thread: onnxruntime runs off the GIL, whereas the
detectors (pure Python) in a thread measured slower than inline, as they held the GIL against the event loop.

A search's reads go ahead too (`prepare_search`): once the worker has registered how it gathers
candidates (`serve_searches`: both index queries under the read filter, the store's re-check,
ranking), they start on the event loop as soon as the query's vector is ready, while Temporal is
still starting the workflow (~20 ms here), and the activity takes the ranked candidates if they were
gathered for exactly its read filter and k. They are reads only, under the filter the activity would
apply; everything with an effect or a deadline (read-time revalidation, which hits to serve and
withhold) stays in the activity, and the API re-checks eligibility again before it loads content.

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
from collections.abc import Awaitable, Callable
from typing import TypeVar

from memwarden.embed import Embedder
from memwarden.records import ReadFilter

MAX_IN_FLIGHT = 1024
"""A bound on entries, in case a caller forgets to discard: the oldest goes first."""

V = TypeVar("V")

Gatherer = Callable[[str, list[float], ReadFilter, int], Awaitable[object]]
"""(query, its vector, read filter, k) -> the worker's gathered candidates (opaque here)."""


def _retrieved(task: asyncio.Future[object]) -> None:
    """A speculation nobody took may have failed: its error is the activity's to report, not the loop's."""
    if not task.cancelled():
        task.exception()


def _cancel(task: asyncio.Future[object]) -> None:
    """Cancel a gathering from any thread (its loop runs it); a closed loop has nothing left to cancel."""
    with contextlib.suppress(RuntimeError):
        task.get_loop().call_soon_threadsafe(task.cancel)


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
        self._searches: dict[str, tuple[ReadFilter, int, asyncio.Future[object]]] = {}
        self._gather: Gatherer | None = None
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

    def serve_searches(self, gather: Gatherer) -> None:
        """Called by the worker that shares this tier: how a search's candidates are gathered."""
        self._gather = gather

    def prepare_search(self, ref: str, text: str, read_filter: ReadFilter, k: int) -> None:
        """`prepare` for a search query, and (with a gatherer registered) its reads started on this loop."""
        self.prepare(ref, text)
        if self._gather is None:
            return
        task = asyncio.ensure_future(self._speculate(ref, text, read_filter, k))
        task.add_done_callback(_retrieved)
        self._put(self._searches, ref, (read_filter, k, task))

    async def _speculate(self, ref: str, text: str, read_filter: ReadFilter, k: int) -> object:
        with self._lock:
            entry = self._entries.get(ref)
        if entry is None or self._gather is None:
            return None
        vector = await asyncio.wrap_future(entry[1])
        return await self._gather(text, vector, read_filter, k)

    async def take_search(self, ref: str, read_filter: ReadFilter, k: int) -> object | None:
        """The candidates gathered ahead for `ref`, removing them; None when there are none, they were
        gathered for another filter or k, or gathering failed (the caller then gathers for itself)."""
        entry = self._pop(self._searches, ref)
        if entry is None:
            return None
        held_filter, held_k, task = entry
        if task.get_loop() is not asyncio.get_running_loop() or held_k != k or held_filter != read_filter:
            _cancel(task)
            return None
        await asyncio.wait((task,))  # a gathering cancelled meanwhile (the request ended) is None, not our error
        if task.cancelled() or task.exception() is not None:
            return None
        gathered = task.result()
        if gathered is not None:
            self._pop(self._entries, ref)  # its vector is spent
        return gathered

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
            search = self._searches.pop(ref, None)
        if search is not None:
            _cancel(search[2])

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def close(self) -> None:
        """Drop every entry and stop the threads (running embeddings finish first)."""
        with self._lock:
            self._entries.clear()
            self._subjects.clear()
            self._parking.clear()
            searches = list(self._searches.values())
            self._searches.clear()
        for _, _, task in searches:
            _cancel(task)
        self._pool.shutdown(wait=True)
