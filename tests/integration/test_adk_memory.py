"""memwarden as Google ADK's memory service, with ADK's own sessions and events, against the embedded stack.

A session's user events go through the gate one by one (the agent's replies never do), search answers
`MemoryEntry` items carrying memwarden's label, and `delete_memory` is a verified forget. What memwarden
holds afterwards is read back through its own API.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncGenerator, AsyncIterator

import httpx
import pytest
from google.adk.agents.llm_agent import LlmAgent
from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions.in_memory_session_service import InMemorySessionService
from google.adk.sessions.session import Session
from google.adk.tools.preload_memory_tool import PreloadMemoryTool
from google.genai import types
from pydantic import Field

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
    label_line, text = (entry.content.parts[0].text or "").split("\n", 1)
    assert text == "I moved to Porto last spring and I work at the harbour office"
    assert label_line == entry.custom_metadata["memwarden_label"]  # the text a prompt sees is labelled
    assert entry.author == "user" and entry.timestamp
    assert entry.custom_metadata["memwarden_freshness"] == "fresh"
    assert entry.custom_metadata["memwarden_type"] == "episodic"
    assert label_line.startswith("[MEMORY type=episodic ") and "source=user freshness=fresh]" in label_line

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
    # ADK may add the session again: a forgotten turn is not proposed again (its key names the deletion's row).
    await memory.add_session_to_memory(session)
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
        await memory.add_events_to_memory(app_name=APP, user_id="bob", events=session.events, session_id=session.id)
    with pytest.raises(MemoryForbidden):
        await memory.search_memory(app_name=APP, user_id="bob", query="bicycle")
    mine = await conversation(sessions, "alice", [("user", "I keep my bicycle in the basement storage room")])
    (outcome,) = await memory.ingest(app_name=APP, user_id="alice", events=mine.events, session_id=mine.id)
    assert outcome.decision == "ADD", outcome  # the turn's own decision, so a refusal fails here, with its reason
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


class FakeLlm(BaseLlm):
    """A fake model (no LLM provider exists here), speaking ADK's model protocol: it records each
    request it is sent and answers with a fixed line."""

    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text="Noted.")]))


async def test_a_runner_remembers_a_session_and_preloads_it_labelled(api: Api) -> None:
    """ADK's own Runner and its preload_memory tool: a later session's prompt carries the earlier turn,
    under memwarden's label, and never the agent's reply."""
    t = tenant()
    model = FakeLlm(model="fake-llm")
    agent = LlmAgent(name=APP, model=model, instruction="Help the user.", tools=[PreloadMemoryTool()])
    memory = service(api, t)
    runner = Runner(agent=agent, app_name=APP, session_service=InMemorySessionService(), memory_service=memory)

    async def say(session_id: str, text: str) -> None:
        message = types.Content(role="user", parts=[types.Part(text=text)])
        async for _ in runner.run_async(user_id="alice", session_id=session_id, new_message=message):
            pass

    first = await runner.session_service.create_session(app_name=APP, user_id="alice")
    await say(first.id, "I moved to Porto last spring and I work at the harbour office")
    session = await runner.session_service.get_session(app_name=APP, user_id="alice", session_id=first.id)
    assert session is not None
    await memory.add_session_to_memory(session)

    second = await runner.session_service.create_session(app_name=APP, user_id="alice")
    await say(second.id, "Which city do I work in, remind me?")
    prompt = "\n".join(part.text or "" for content in model.requests[-1].contents for part in content.parts or [])
    assert "<PAST_CONVERSATIONS>" in prompt
    assert "[MEMORY type=episodic " in prompt and "I moved to Porto last spring" in prompt
    assert "Noted." not in prompt.split("<PAST_CONVERSATIONS>")[1].split("</PAST_CONVERSATIONS>")[0]
