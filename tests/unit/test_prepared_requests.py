"""The in-process tier of requests in flight: the real MiniLM model, real threads; no store involved."""

from __future__ import annotations

import asyncio
import threading

import pytest

from memwarden.embed import MiniLMEmbedder, default_embedder
from memwarden.prepared import PreparedRequests
from memwarden.records import NamespaceClause, ReadFilter, Scope


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return default_embedder()


async def test_take_returns_the_text_and_the_same_vector_the_activity_would_compute(embedder: MiniLMEmbedder) -> None:
    prepared = PreparedRequests(embedder)
    try:
        prepared.prepare("query-1", "where does my sister live")
        assert len(prepared) == 1
        taken = await prepared.take("query-1")
        assert taken is not None
        text, vector = taken
        assert text == "where does my sister live"
        assert vector == embedder.embed(["where does my sister live"])[0]
        assert len(prepared) == 0
        assert await prepared.take("query-1") is None  # taken once: a retried attempt reads the store
    finally:
        prepared.close()


async def test_unknown_and_discarded_refs_send_the_caller_to_the_store(embedder: MiniLMEmbedder) -> None:
    prepared = PreparedRequests(embedder)
    try:
        assert await prepared.take("never-prepared") is None
        prepared.prepare("query-2", "anything")
        prepared.discard("query-2")
        prepared.discard("query-2")  # idempotent
        assert await prepared.take("query-2") is None
        assert len(prepared) == 0
    finally:
        prepared.close()


class _Failing:
    dim = 384

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise RuntimeError("model unavailable")


async def test_a_failed_embedding_is_none_not_an_error() -> None:
    prepared = PreparedRequests(_Failing())
    try:
        prepared.prepare("query-3", "x")
        assert await prepared.take("query-3") is None
    finally:
        prepared.close()


class _Gated:
    """Embeds only when released, so the test sees the work running while the caller goes on."""

    dim = 2

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()

    def embed(self, texts: list[str]) -> list[list[float]]:
        self.started.set()
        self.release.wait(5)
        return [[1.0, 0.0] for _ in texts]


async def test_prepare_returns_at_once_and_embedding_runs_meanwhile() -> None:
    gated = _Gated()
    prepared = PreparedRequests(gated)
    try:
        prepared.prepare("query-4", "x")  # returns while the model is still busy
        assert await asyncio.to_thread(gated.started.wait, 5)
        waiting = asyncio.create_task(prepared.take("query-4"))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        gated.release.set()
        assert await asyncio.wait_for(waiting, 5) == ("x", [1.0, 0.0])
    finally:
        gated.release.set()
        prepared.close()


async def test_entries_are_bounded(embedder: MiniLMEmbedder) -> None:
    prepared = PreparedRequests(embedder, capacity=2)
    try:
        for n in range(3):
            prepared.prepare(f"q{n}", f"text {n}")
        assert len(prepared) == 2
        assert await prepared.take("q0") is None  # the oldest went first
        assert (await prepared.take("q2") or ("", []))[0] == "text 2"
    finally:
        prepared.close()
    with pytest.raises(ValueError):
        PreparedRequests(embedder, threads=0)


async def test_a_candidate_is_embedded_and_taken_once_for_its_own_text(embedder: MiniLMEmbedder) -> None:
    prepared = PreparedRequests(embedder)
    try:
        prepared.prepare("mem-1", "synthetic: keeps the teal notebook")
        assert await prepared.take_candidate("mem-1", "some other text") is None  # the store disagrees: dropped
        prepared.prepare("mem-1", "synthetic: keeps the teal notebook")
        vector = await prepared.take_candidate("mem-1", "synthetic: keeps the teal notebook")
        assert vector == embedder.embed(["synthetic: keeps the teal notebook"])[0]
        assert await prepared.take_candidate("mem-1", "synthetic: keeps the teal notebook") is None  # once
        assert len(prepared) == 0
    finally:
        prepared.close()


async def test_held_ids_and_filters_are_taken_by_their_own_kind_once(embedder: MiniLMEmbedder) -> None:
    prepared = PreparedRequests(embedder)
    try:
        prepared.hold_ids("subject-a", {"owner_id": "alice", "writer": "user:alice"})
        assert prepared.take_filter("subject-a") is None  # not a read filter: dropped, the store serves
        prepared.hold_ids("subject-a", {"owner_id": "alice", "writer": None})
        assert prepared.take_ids("subject-a") == {"owner_id": "alice", "writer": None}
        assert prepared.take_ids("subject-a") is None
        prepared.hold_ids("subject-b", {"owner_id": "bob", "writer": None})
        prepared.discard("subject-b")
        assert prepared.take_ids("subject-b") is None
    finally:
        prepared.close()


async def test_parked_waits_for_the_park_in_flight_and_not_for_a_failed_one(embedder: MiniLMEmbedder) -> None:
    prepared = PreparedRequests(embedder)
    try:
        landed = asyncio.Event()

        async def park() -> None:
            await asyncio.sleep(0.05)
            landed.set()

        prepared.hold_parking("mem-3", asyncio.ensure_future(park()))
        await prepared.parked("mem-3")
        assert landed.is_set()
        await asyncio.wait_for(prepared.parked("mem-3"), 1)  # taken: returns at once
        await asyncio.wait_for(prepared.parked("never-held"), 1)

        async def fail() -> None:
            raise ValueError("candidate ref belongs to another tenant")

        prepared.hold_parking("mem-4", asyncio.ensure_future(fail()))
        await prepared.parked("mem-4")  # the absent claim check speaks for it
    finally:
        prepared.close()


def _filter(owner: str) -> ReadFilter:
    return ReadFilter(tenant_id="t1", clauses=(NamespaceClause(scope=Scope.USER, owner_ids=(owner,)),))


async def test_a_search_is_gathered_ahead_for_exactly_its_filter_and_k(embedder: MiniLMEmbedder) -> None:
    """The worker's reads start as the request arrives, with the API's vector; the activity takes them
    only for the very read filter and k it was given, once; anything else gathers anew."""
    prepared = PreparedRequests(embedder)
    calls: list[tuple[str, list[float], ReadFilter, int]] = []

    async def gather(text: str, vector: list[float], read_filter: ReadFilter, k: int) -> object:
        calls.append((text, vector, read_filter, k))
        return ("gathered", len(calls))

    try:
        prepared.prepare_search("q-1", "bees on the roof", _filter("alice"), 5)
        assert await prepared.take_search("q-1", _filter("alice"), 5) is None  # no gatherer registered yet
        assert (await prepared.take("q-1") or ("", []))[0] == "bees on the roof"  # the vector still serves

        prepared.serve_searches(gather)
        prepared.prepare_search("q-2", "bees on the roof", _filter("alice"), 5)
        assert await prepared.take_search("q-2", _filter("alice"), 5) == ("gathered", 1)
        [(text, vector, read_filter, k)] = calls
        assert (text, read_filter, k) == ("bees on the roof", _filter("alice"), 5)
        assert vector == embedder.embed(["bees on the roof"])[0]
        assert await prepared.take_search("q-2", _filter("alice"), 5) is None  # once: a retry gathers anew
        assert await prepared.take("q-2") is None and len(prepared) == 0  # the vector went with it

        prepared.prepare_search("q-3", "bees on the roof", _filter("alice"), 5)
        assert await prepared.take_search("q-3", _filter("mallory"), 5) is None  # another filter: not served
        prepared.prepare_search("q-4", "bees on the roof", _filter("alice"), 5)
        assert await prepared.take_search("q-4", _filter("alice"), 6) is None  # another k: not served
        assert (await prepared.take("q-4") or ("", []))[0] == "bees on the roof"  # the activity embeds from here
    finally:
        prepared.close()


async def test_a_failed_or_discarded_gathering_is_none_not_an_error(embedder: MiniLMEmbedder) -> None:
    prepared = PreparedRequests(embedder)
    started = asyncio.Event()

    async def failing(text: str, vector: list[float], read_filter: ReadFilter, k: int) -> object:
        raise RuntimeError("index unavailable")

    async def slow(text: str, vector: list[float], read_filter: ReadFilter, k: int) -> object:
        started.set()
        await asyncio.sleep(30)
        return "late"

    try:
        prepared.serve_searches(failing)
        prepared.prepare_search("q-5", "x", _filter("alice"), 5)
        assert await prepared.take_search("q-5", _filter("alice"), 5) is None  # the activity reports it itself
        assert (await prepared.take("q-5") or ("", []))[0] == "x"  # after gathering for itself
        prepared.serve_searches(slow)
        prepared.prepare_search("q-6", "x", _filter("alice"), 5)
        await asyncio.wait_for(started.wait(), 5)
        prepared.discard("q-6")  # the workflow ended without taking it: the reads are cancelled
        assert await prepared.take_search("q-6", _filter("alice"), 5) is None
        assert len(prepared) == 0
    finally:
        prepared.close()
