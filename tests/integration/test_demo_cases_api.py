"""The write-gate demo's own cases through the public API: paraphrases are duplicates, changed values are
not, and a search returns only what is relevant.

Real HTTP, the real dev server, the worker over SQLite and Qdrant Edge, the real embedder. Each test has
its own tenant, so the memories of one are not candidates for another.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from memwarden.records import Status
from tests.integration.api_stack import Api

FACT = {"type": "fact", "source_kind": "user", "reason": "user_stated_fact", "importance": 0.8}
FASTAPI = "User builds backends with Python and FastAPI"
BANGALORE = "User lives in Bangalore"
DEMO_MEMORIES = (
    FASTAPI,
    BANGALORE,
    "User prefers dark mode in every editor",
    "User's manager is Priya",
    "User is allergic to peanuts",
)
"""The demo's two memories the issue quotes, and three more of the kinds a person's memory holds."""


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


async def propose(http: httpx.AsyncClient, headers: dict[str, str], content: str, **fields: Any) -> dict[str, Any]:
    answer = await http.post("/v1/memories", headers=headers, json=FACT | {"content": content} | fields)
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


async def search(http: httpx.AsyncClient, headers: dict[str, str], query: str) -> list[dict[str, Any]]:
    answer = await http.post("/v1/search", headers=headers, json={"query": query, "k": 10})
    assert answer.status_code == 200, answer.text
    results: list[dict[str, Any]] = answer.json()["results"]
    return results


# -- dedupe ------------------------------------------------------------------------------------------


async def test_a_paraphrase_in_the_slot_it_repeats_is_noop_with_that_memorys_id(
    api: Api, http: httpx.AsyncClient
) -> None:
    t = tenant()
    alice = api.auth(t, "alice")
    first = await propose(http, alice, FASTAPI, slot="work.backend_stack")
    assert (first["decision"], first["reason"]) == ("ADD", "accepted")
    again = await propose(http, alice, "User builds backends in Python with FastAPI", slot="work.backend_stack")
    assert (again["decision"], again["reason"], again["memory_id"]) == ("NOOP", "duplicate", first["memory_id"])
    held = await api.store.get_memory(t, first["memory_id"])
    assert held is not None and held.status is Status.ACTIVE and held.content == FASTAPI
    listed = (await http.get("/v1/memories", headers=alice)).json()["items"]
    assert [m["id"] for m in listed] == [first["memory_id"]]


async def test_a_changed_value_in_that_slot_still_supersedes(api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()
    alice = api.auth(t, "alice")
    first = await propose(http, alice, FASTAPI, slot="work.backend_stack")
    changed = await propose(http, alice, "User builds backends with Go and FastAPI", slot="work.backend_stack")
    assert (changed["decision"], changed["reason"], changed["supersedes"]) == (
        "UPDATE",
        "slot_value_changed",
        first["memory_id"],
    )


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("The user lives in Bangalore", "The user is based in Bangalore"),
        ("Tom works as a nurse at the city hospital", "Tom is a nurse at the city hospital"),
    ],
    ids=["bangalore", "nurse"],
)
async def test_a_paraphrase_without_a_slot_is_noop(api: Api, http: httpx.AsyncClient, first: str, second: str) -> None:
    t = tenant()
    alice = api.auth(t, "alice")
    stored = await propose(http, alice, first)
    assert stored["decision"] == "ADD"
    again = await propose(http, alice, second)
    assert (again["decision"], again["reason"], again["memory_id"]) == ("NOOP", "duplicate", stored["memory_id"])


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("The user lives in Bangalore", "The user lived in Bangalore"),
        ("The user lives in Bangalore", "The user is based in Mumbai"),
        ("Tom works as a nurse at the city hospital", "Tom works as a doctor at the city hospital"),
        ("Anna reports to the user", "The user reports to Anna"),
    ],
    ids=["tense", "city", "role", "swap"],
)
async def test_a_changed_value_without_a_slot_is_added(
    api: Api, http: httpx.AsyncClient, first: str, second: str
) -> None:
    t = tenant()
    alice = api.auth(t, "alice")
    stored = await propose(http, alice, first)
    again = await propose(http, alice, second)
    assert (again["decision"], again["reason"]) == ("ADD", "accepted")
    assert again["memory_id"] != stored["memory_id"]


# -- the relevance floor -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "relevant"),
    [("what does the user build with python", FASTAPI), ("where does the user live", BANGALORE)],
    ids=["python", "live"],
)
async def test_a_demo_query_returns_only_its_relevant_memory(
    api: Api, http: httpx.AsyncClient, query: str, relevant: str
) -> None:
    t = tenant()
    alice = api.auth(t, "alice")
    ids = {}
    for content in DEMO_MEMORIES:
        stored = await propose(http, alice, content)
        assert stored["decision"] == "ADD", (content, stored)
        ids[content] = stored["memory_id"]
    results = await search(http, alice, query)
    print(query, [(next(c for c, i in ids.items() if i == r["memory_id"]), r["score"]) for r in results])
    assert [r["memory_id"] for r in results] == [ids[relevant]]
