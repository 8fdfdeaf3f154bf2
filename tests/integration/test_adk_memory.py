"""memwarden as Google ADK's memory service, with ADK's own sessions and events, against the embedded stack.

A session's user events go through the gate one by one (the agent's replies never do), search answers
`MemoryEntry` items carrying memwarden's label, and `delete_memory` is a verified forget. What memwarden
holds afterwards is read back through its own API.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest
from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.session import Session
from google.genai import types

from memwarden.integrations.adk import MemwardenMemoryService
from memwarden.integrations.outcomes import MemoryForbidden
from tests.forget_support import wait_verified
from tests.integration.api_stack import Api

APP = "helpdesk"
SECRET = "my deploy key is AKIAZ7QXW3SYNTH5EXMP, keep it handy"


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def http(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=api.base_url, timeout=60) as client:
        yield client


def service(api: Api, t: str) -> MemwardenMemoryService:
    """One service for every user: each call uses the token of the agent serving that user."""
    return MemwardenMemoryService(
        api.base_url, tokens=lambda app, user: api.token(t, f"svc-{app}", role="agent", agent=app, on_behalf_of=user)
    )


async def conversation(sessions: InMemorySessionService, user: str, turns: list[tuple[str, str]]) -> Session:
    session = await sessions.create_session(app_name=APP, user_id=user)
    for number, (author, text) in enumerate(turns):
        event = Event(
            author=author,
            invocation_id=f"inv-{number // 2}",
            content=types.Content(role="user" if author == "user" else "model", parts=[types.Part(text=text)]),
        )
        await sessions.append_event(session, event)
    return session


async def test_a_session_goes_through_the_gate_event_by_event(api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()
    memory = service(api, t)
    assert isinstance(memory, BaseMemoryService)
    sessions = InMemorySessionService()
    session = await conversation(
        sessions,
        "alice",
        [
            ("user", "I moved to Porto last spring and I work at the harbour office"),
            ("helpdesk", "Noted: you live in Porto and work at the harbour office."),
            ("user", SECRET),
            ("helpdesk", "Please do not share keys here."),
            ("user", "From now on always answer me in French"),
        ],
    )
    await memory.add_session_to_memory(session)
    outcomes = await memory.ingest(app_name=APP, user_id="alice", events=session.events, session_id=session.id)
    user_events = [e.id for e in session.events if e.author == "user"]
    assert [o.event_id for o in outcomes] == user_events  # the agent's replies are never candidates
    assert [(o.decision, o.reason) for o in outcomes] == [
        ("ADD", "accepted"),
        ("REJECT", "secret_detected"),
        ("PENDING", "staged_behaviour_change"),
    ]

    # Adding the session again proposed nothing twice (the event id is the idempotency key).
    alice = api.auth(t, "alice")
    listed = (await http.get("/v1/memories", headers=alice)).json()["items"]
    assert sorted(m["status"] for m in listed) == ["active", "pending"]
    porto = outcomes[0].memory_id
    detail = (await http.get(f"/v1/memories/{porto}", headers=alice)).json()
    assert (detail["scope"], detail["agent_id"], detail["owner_id"]) == ("agent", APP, "alice")
    assert (detail["provenance"]["session"], detail["provenance"]["turn"]) == (session.id, "inv-0")
    assert (detail["type"], detail["source_kind"]) == ("episodic", "user")

    found = await memory.search_memory(app_name=APP, user_id="alice", query="where does the user live?")
    assert [m.id for m in found.memories] == [porto]
    (entry,) = found.memories
    assert entry.content.parts is not None
    assert entry.content.parts[0].text == "I moved to Porto last spring and I work at the harbour office"
    assert entry.author == "user" and entry.timestamp
    assert entry.custom_metadata["memwarden_freshness"] == "fresh"
    assert entry.custom_metadata["memwarden_type"] == "episodic"
    label = entry.custom_metadata["memwarden_label"]
    assert isinstance(label, str) and "user" in label

    # Another user of the same app sees none of it: the token, not the user_id argument, decides.
    bob = await memory.search_memory(app_name=APP, user_id="bob", query="where does the user live?")
    assert bob.memories == []

    # delete_memory is a forget: gone from search at once, then verified in every sink.
    deletion = await memory.forget(app_name=APP, user_id="alice", memory_id=porto)
    assert (await memory.search_memory(app_name=APP, user_id="alice", query="Porto harbour office")).memories == []
    agent = api.auth(t, f"svc-{APP}", role="agent", agent=APP)
    receipt = await wait_verified(http, deletion["deletion_id"], agent)
    assert {s["status"] for s in receipt["sinks"]} == {"verified"}
    await memory.delete_memory(app_name=APP, user_id="alice", memory_id=outcomes[2].memory_id)  # the pending one
    assert (await http.get("/v1/memories", headers=alice)).json()["items"] == []


async def test_a_fixed_token_serves_only_its_user(api: Api) -> None:
    t = tenant()
    token = api.token(t, "svc", role="agent", agent=APP, on_behalf_of="alice")
    memory = MemwardenMemoryService(api.base_url, token=token)
    sessions = InMemorySessionService()
    session = await conversation(sessions, "bob", [("user", "I keep my bicycle in the basement storage room")])
    with pytest.raises(MemoryForbidden) as refused:
        await memory.add_session_to_memory(session)
    assert refused.value.code == "user_mismatch"
    with pytest.raises(MemoryForbidden):
        await memory.search_memory(app_name=APP, user_id="bob", query="bicycle")
    mine = await conversation(sessions, "alice", [("user", "I keep my bicycle in the basement storage room")])
    await memory.add_events_to_memory(app_name=APP, user_id="alice", events=mine.events, session_id=mine.id)
    found = await memory.search_memory(app_name=APP, user_id="alice", query="where is the bicycle kept?")
    assert len(found.memories) == 1 and found.memories[0].custom_metadata["memwarden_source_kind"] == "user"


async def test_the_user_scope_is_the_persons_to_forget(api: Api) -> None:
    """With `scope="user"` turns join the person's own memory; the agent may read them, not forget them."""
    t = tenant()
    memory = MemwardenMemoryService(
        api.base_url,
        tokens=lambda app, user: api.token(t, "svc", role="agent", agent=app, on_behalf_of=user),
        scope="user",
    )
    sessions = InMemorySessionService()
    session = await conversation(sessions, "alice", [("user", "My sister Ana studies marine biology in Faro")])
    (outcome,) = await memory.ingest(app_name=APP, user_id="alice", events=session.events, session_id=session.id)
    assert outcome.decision == "ADD"
    with pytest.raises(MemoryForbidden) as forbidden:
        await memory.delete_memory(app_name=APP, user_id="alice", memory_id=outcome.memory_id)
    assert forbidden.value.code == "not_own_store"
