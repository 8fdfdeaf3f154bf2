"""memwarden as LangGraph's store, end to end: a compiled graph's nodes write, search and forget through
`MemwardenStore` against the embedded stack (real Temporal dev server, real HTTP, the real gate).

Each test checks what memwarden holds afterwards through its own API (the slot, the scope, the
superseded version, the verified receipt), so a store that only looked right to LangGraph fails.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any, TypedDict

import httpx
import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError, PutOp

from memwarden.integrations.langgraph import MemwardenStore
from memwarden.integrations.outcomes import (
    MemoryDuplicate,
    MemoryForbidden,
    MemoryInvalid,
    MemoryPending,
    MemoryRejected,
)
from tests.forget_support import wait_verified
from tests.integration.api_stack import Api

SECRET = "the deploy key is AKIAZ7QXW3SYNTH5EXMP, keep it handy"


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def http(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=api.base_url, timeout=60) as client:
        yield client


def agent_store(api: Api, t: str, **claims: Any) -> MemwardenStore:
    token = api.token(t, "svc", role="agent", agent="planner", on_behalf_of="alice", **claims)
    return MemwardenStore(api.base_url, token)


class Notes(TypedDict, total=False):
    question: str
    found: list[dict[str, Any]]
    deletion_id: str


async def test_a_compiled_graph_writes_searches_and_forgets_through_the_gate(api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()
    alice = api.auth(t, "alice")

    async def remember(state: Notes, *, store: BaseStore) -> Notes:
        await store.aput(("user", "profile"), "drink", {"text": "Alice drinks green tea every morning"})
        await store.aput(("agent", "notes"), "style", {"text": "Alice wants answers in three bullet points"})
        return {}

    async def recall(state: Notes, *, store: BaseStore) -> Notes:
        hits = await store.asearch(("user",), query=state["question"], limit=3)
        return {
            "found": [
                {"namespace": h.namespace, "key": h.key, "value": h.value, "score": h.score, "label": h.label}  # type: ignore[attr-defined]
                for h in hits
            ]
        }

    async def tidy(state: Notes, *, store: BaseStore) -> Notes:
        forgotten = await store.aforget(("agent", "notes"), "style")  # type: ignore[attr-defined]
        assert forgotten is not None
        return {"deletion_id": forgotten.deletion_id}

    builder = StateGraph(Notes)
    builder.add_node("remember", remember)
    builder.add_node("recall", recall)
    builder.add_node("tidy", tidy)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "recall")
    builder.add_edge("recall", "tidy")
    builder.add_edge("tidy", END)
    with agent_store(api, t) as store:
        graph = builder.compile(store=store)
        out = await graph.ainvoke({"question": "what does alice drink in the morning?"})

        assert out["found"][0]["namespace"] == ("user", "profile") and out["found"][0]["key"] == "drink"
        assert out["found"][0]["value"] == {"text": "Alice drinks green tea every morning"}
        assert out["found"][0]["score"] > 0
        assert out["found"][0]["label"].startswith("[MEMORY type=fact ") and "source=app" in out["found"][0]["label"]
        assert [h["key"] for h in out["found"]] == ["drink"]  # the agent-scope note is not under ("user",)

        # memwarden holds the item as alice's memory, in its slot, written by the agent.
        listed = (await http.get("/v1/memories", headers=alice)).json()["items"]
        (drink,) = [m for m in listed if m["slot"] == "lg.profile.drink"]
        assert (drink["scope"], drink["owner_id"], drink["provenance"]["writer"]) == ("user", "alice", "agent:svc")
        assert drink["content"] == '{"text":"Alice drinks green tea every morning"}'

        # The delete was a forget: tombstoned at once, then every sink verified, with a receipt.
        assert await store.aget(("agent", "notes"), "style") is None
        receipt = await wait_verified(http, out["deletion_id"], api.auth(t, "svc", role="agent", agent="planner"))
        assert receipt["receipt_hash"] and {s["status"] for s in receipt["sinks"]} == {"verified"}
        assert (await store.adeletion(out["deletion_id"]))["status"] == "verified"

        # A second put to the key supersedes the first; memwarden keeps the old one as history.
        await store.aput(("user", "profile"), "drink", {"text": "Alice drinks black coffee every morning"})
        item = await store.aget(("user", "profile"), "drink")
        assert item is not None and item.value == {"text": "Alice drinks black coffee every morning"}
        current = item_id(await listing(http, alice), "lg.profile.drink")
        detail = (await http.get(f"/v1/memories/{current}", headers=alice)).json()
        assert [h["status"] for h in detail["history"]] == ["superseded"]


def item_id(listed: list[dict[str, Any]], slot: str) -> str:
    (memory,) = [m for m in listed if m["slot"] == slot]
    return str(memory["id"])


async def listing(http: httpx.AsyncClient, headers: dict[str, str]) -> list[dict[str, Any]]:
    return list((await http.get("/v1/memories", headers=headers)).json()["items"])


async def test_what_the_gate_decides_reaches_the_graph(api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()

    async def leak(state: Notes, *, store: BaseStore) -> Notes:
        await store.aput(("user", "ops"), "deploy", {"text": SECRET})
        return {}

    builder = StateGraph(Notes)
    builder.add_node("leak", leak)
    builder.add_edge(START, "leak")
    with agent_store(api, t, stores=["team"], moderates=[]) as store:
        graph = builder.compile(store=store)
        with pytest.raises(MemoryRejected) as rejected:
            await graph.ainvoke({})
        assert rejected.value.reason == "secret_detected" and rejected.value.memory_id is None
        assert SECRET not in str(rejected.value)
        assert await store.aget(("user", "ops"), "deploy") is None

        # A shared store's write waits for its moderator: the put says so, with the id to confirm.
        with pytest.raises(MemoryPending) as pending:
            await store.aput(("shared", "team", "runbooks"), "oncall", {"text": "The team rotates on-call duty weekly"})
        assert pending.value.reason == "staged_shared_store"
        assert await store.aget(("shared", "team", "runbooks"), "oncall") is None
        moderator = api.auth(t, "mo", role="user", stores=["team"], moderates=["team"])
        confirmed = await http.post(f"/v1/memories/{pending.value.memory_id}/confirm", headers=moderator)
        assert confirmed.status_code == 200 and confirmed.json()["decision"] == "ADD", confirmed.text
        item = await store.aget(("shared", "team", "runbooks"), "oncall")
        assert item is not None and item.value == {"text": "The team rotates on-call duty weekly"}

        # The same value again is a no-op; a paraphrase the gate calls the same memory is a visible duplicate.
        await store.aput(("user", "profile"), "city", {"text": "Alice lives in Lisbon"})
        await store.aput(("user", "profile"), "city", {"text": "Alice lives in Lisbon"})
        with pytest.raises(MemoryDuplicate) as duplicate:
            await store.aput(("user", "profile"), "city", {"text": "Alice lives in Lisbon."})
        current = await store.aget(("user", "profile"), "city")
        assert current is not None and current.value == {"text": "Alice lives in Lisbon"}
        assert duplicate.value.memory_id == item_id(await listing(http, api.auth(t, "alice")), "lg.profile.city")

        # Authorization is the token's: an agent forgets its own store, not its user's memory.
        with pytest.raises(MemoryForbidden) as forbidden:
            await store.adelete(("user", "profile"), "city")
        assert forbidden.value.code == "not_own_store"
        with pytest.raises(MemoryForbidden) as not_member:
            await store.aput(("shared", "finance"), "budget", {"text": "The travel budget is 400 euros"})
        assert not_member.value.code == "not_a_store_member"

        # LangGraph's namespace rules, and memwarden's roots.
        for bad in [(), ("langgraph", "x"), ("user", "a.b"), ("user", ""), ("notes",), ("shared",)]:
            with pytest.raises(InvalidNamespaceError):
                await store.aput(bad, "k", {"text": "never sent"})
        with pytest.raises(InvalidNamespaceError):
            await store.abatch([PutOp(("user", "a.b"), "k", {"text": "never sent"})])
        with pytest.raises(MemoryInvalid) as too_long:
            await store.aput(("user", "profile"), "k" * 200, {"text": "a key memwarden cannot hold"})
        assert too_long.value.code == "slot_too_long"
    listed = await listing(http, api.auth(t, "alice"))
    assert not any(m["slot"] and m["slot"].startswith("lg.") and "never" in (m["content"] or "") for m in listed)


async def test_ttl_becomes_ttl_seconds_and_lapses(api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()
    with agent_store(api, t) as store:
        assert store.supports_ttl and store.ttl_config == {"refresh_on_read": False, "default_ttl": None}
        await store.aput(("user", "trip"), "gate", {"text": "Alice boards at gate B7 today"}, ttl=5 / 60)
        await store.aput(("user", "trip"), "seat", {"text": "Alice sits in seat 14C today"})
        memory = next(m for m in await listing(http, api.auth(t, "alice")) if m["slot"] == "lg.trip.gate")
        lifetime = datetime.fromisoformat(memory["expires_at"]) - datetime.fromisoformat(memory["created_at"])
        assert abs(lifetime.total_seconds() - 5) < 1  # ttl is in minutes (LangGraph's unit): 5/60 is 5 s
        deadline = time.monotonic() + 60
        while await store.aget(("user", "trip"), "gate") is not None:
            assert time.monotonic() < deadline, "the item outlived its ttl"
            await asyncio.sleep(0.5)
        assert [i.key for i in await store.asearch(("user", "trip"))] == ["seat"]


async def test_a_synchronous_graph_uses_the_same_store(api: Api) -> None:
    """`batch` (sync nodes, `graph.invoke`) runs on the store's own loop, as `abatch` does."""
    t = tenant()

    def write(state: Notes, *, store: BaseStore) -> Notes:
        store.put(("agent", "todo"), "next", {"text": "Book the dentist appointment for Alice"})
        return {}

    def read(state: Notes, *, store: BaseStore) -> Notes:
        items = store.search(("agent",))
        namespaces = store.list_namespaces(prefix=("agent",))
        return {"found": [{"key": i.key, "value": i.value, "namespaces": namespaces} for i in items]}

    builder = StateGraph(Notes)
    builder.add_node("write", write)
    builder.add_node("read", read)
    builder.add_edge(START, "write")
    builder.add_edge("write", "read")
    with agent_store(api, t) as store:
        out = await asyncio.to_thread(builder.compile(store=store).invoke, {})
    assert out["found"] == [
        {"key": "next", "value": {"text": "Book the dentist appointment for Alice"}, "namespaces": [("agent", "todo")]}
    ]
