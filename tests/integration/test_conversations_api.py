"""`POST /v1/conversations` over real HTTP, the embedded stack (Temporal dev server, worker, SQLite, Qdrant Edge).

A conversation becomes candidates (the rule-based extractor), each decided by the gate in its own
RememberWorkflow; the answer names, per candidate, the decision and the message it came from. Sending it
again stores nothing twice; the workflows' histories hold no message text; task guidance repeated in three
sessions is staged as a durable preference; near-duplicate episodes of a session become its summary.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import string
import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import WorkflowFailureError

from memwarden.client import MemwardenClient, MemwardenError
from memwarden.extract.base import Message
from memwarden.keys import Purpose
from memwarden.records import MessageRole, Scope, Status
from memwarden.services.conversations import ConversationTarget, conversation_workflow_id, park_conversation
from memwarden.stores.summaries import summaries_touching
from tests.forget_support import scan
from tests.integration.api_stack import assert_problem
from tests.stack_support import Stack, embedded_stack
from workflows.conversation import ConversationWorkflow

SPANS = InMemorySpanExporter()


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    async with embedded_stack(tmp_path_factory.mktemp("conversations"), span_exporter=SPANS) as s:
        yield s


@pytest.fixture
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=120) as client:
        yield client


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


CONVERSATION = [
    {"role": "system", "content": "You are a helpful assistant. I live in Atlantis."},
    {"role": "user", "content": "Hi! I live in Mumbai and I love spicy food.", "turn_id": "u1"},
    {"role": "assistant", "content": "Nice to meet you! What can I help with today?", "turn_id": "a1"},
    {"role": "user", "content": "Can you suggest a weekend trip?", "turn_id": "u2"},
    {"role": "user", "content": "Actually, I moved to Pune last month.", "turn_id": "u3"},
    {"role": "user", "content": "For this ticket, keep the reply very short.", "turn_id": "u4"},
    {"role": "tool", "content": '{"error": "timeout", "status": 504}', "turn_id": "t1"},
]


async def send(http: httpx.AsyncClient, headers: dict[str, str], session: str, messages: list[dict[str, Any]]) -> Any:
    answer = await http.post("/v1/conversations", headers=headers, json={"session_id": session, "messages": messages})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["status"] == "done"
    return body


async def test_a_conversation_becomes_gated_memories_with_their_messages(stack: Stack, http: httpx.AsyncClient) -> None:
    t = tenant()
    headers = stack.auth(t, "alice")
    body = await send(http, headers, "s-1", CONVERSATION)
    got = [(c["message_index"], c["turn_id"], c["kind"], c["type"], c["decision"]) for c in body["candidates"]]
    assert got == [
        (1, "u1", "fact", "fact", "ADD"),
        (1, "u1", "preference", "preference", "ADD"),
        (4, "u3", "correction", "fact", "UPDATE"),
        (5, "u4", "task_guidance", "task", "ADD"),
    ], got
    location, spicy, moved, guidance = body["candidates"]
    assert moved["supersedes"] == location["memory_id"], "the correction updates the slot it corrects"
    assert all(c["workflow_id"] == f"remember-{c['memory_id']}" for c in body["candidates"])

    store = stack.deps.store
    old = await store.get_memory(t, location["memory_id"])
    new = await store.get_memory(t, moved["memory_id"])
    task = await store.get_memory(t, guidance["memory_id"])
    assert old is not None and new is not None and task is not None
    assert old.status is Status.SUPERSEDED and old.content == "I live in Mumbai."
    assert new.status is Status.ACTIVE and new.slot == "location" and new.content == "I moved to Pune last month."
    assert new.provenance.session == "s-1" and new.provenance.turn == "u3"
    assert task.type.value == "task" and task.expires_at is not None, "task guidance expires with its task"
    assert (await store.get_memory(t, spicy["memory_id"])) is not None

    # Every candidate was decided by the gate and audited, one decision event each.
    events, _ = await store.list_audit(t, limit=100, cursor=None, oldest_first=True)
    decided = [e for e in events if e.operation in ("create", "update", "stage", "deny", "noop")]
    assert sorted(e.memory_id for e in decided) == sorted(c["memory_id"] for c in body["candidates"])
    # The conversation's claim check is dropped once it was decided.
    assert await store.get_candidate(f"conversation-{body['workflow_id'].removeprefix('conversation-')}") is None


async def test_a_message_holding_a_secret_is_refused_before_parking_and_the_rest_goes_on(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    """Issue 22 part 8 for conversations: a message the gate would reject whatever was extracted from it
    (a secret) is never parked, so no byte of it reaches the data dir; it is answered REJECT with its
    index, audited once (no content hash), and the other messages are extracted and decided as usual."""
    t = tenant()
    headers = stack.auth(t, "alice")
    key = "AKIA" + "".join(secrets.choice(string.ascii_uppercase + "234567") for _ in range(16))
    marker = f"heron{uuid.uuid4().hex[:10]}"
    messages = [
        {"role": "user", "content": f"I live in {marker}ville.", "turn_id": "u1"},
        {"role": "user", "content": f"My deploy key is {key}, I prefer to keep it handy.", "turn_id": "u2"},
    ]
    body = await send(http, headers, "s-secret", messages)
    refused = [c for c in body["candidates"] if c["message_index"] == 1]
    assert [(c["kind"], c["type"], c["decision"], c["reason"]) for c in refused] == [
        ("message", None, "REJECT", "secret_detected")
    ]
    kept = [c for c in body["candidates"] if c["message_index"] == 0]
    assert [(c["kind"], c["decision"]) for c in kept] == [("fact", "ADD")], body
    assert key not in str(body)
    again = await send(http, headers, "s-secret", messages)
    assert again["candidates"] == body["candidates"]
    denials, _ = await stack.deps.store.list_audit(t, operation="deny", limit=10, cursor=None)
    assert [(e.reason, e.hash_after, e.details.get("conversation_message")) for e in denials] == [
        ("secret_detected", None, 1)
    ]
    assert scan(stack.settings.data_dir, marker.encode())  # the control: what was parked is on disk
    assert scan(stack.settings.data_dir, key.encode()) == []


async def test_sending_it_again_stores_nothing_twice(stack: Stack, http: httpx.AsyncClient) -> None:
    t = tenant()
    headers = stack.auth(t, "bob")
    first = await send(http, headers, "s-2", CONVERSATION)
    again = await send(http, headers, "s-2", CONVERSATION)
    assert again == first, "the same conversation is the same workflow: the same answer"
    longer = [*CONVERSATION, {"role": "user", "content": "My favourite season is autumn.", "turn_id": "u5"}]
    grown = await send(http, headers, "s-2", longer)
    assert grown["workflow_id"] != first["workflow_id"]
    earlier, latest = grown["candidates"][:-1], grown["candidates"][-1]
    assert [c["memory_id"] for c in earlier] == [c["memory_id"] for c in first["candidates"]]
    assert {c["reason"] for c in earlier} == {"replayed"}, earlier
    assert latest["decision"] == "ADD" and latest["message_index"] == 7
    rows = await http.get("/v1/memories", headers=headers, params={"status": ["active", "superseded", "pending"]})
    assert rows.status_code == 200
    ids = [m["id"] for m in rows.json()["items"]]
    assert len(ids) == len(set(ids)) == len(grown["candidates"]), rows.json()


async def test_workflow_histories_hold_no_message_text(stack: Stack, http: httpx.AsyncClient) -> None:
    t = tenant()
    secret_words = "Zanzibarian marmalade"
    messages = [{"role": "user", "content": f"I really love {secret_words} on toast.", "turn_id": "u1"}]
    body = await send(http, stack.auth(t, "carol"), "s-history", messages)
    assert body["candidates"][0]["decision"] == "ADD"
    for workflow_id in (body["workflow_id"], body["candidates"][0]["workflow_id"]):
        history = await stack.client.get_workflow_handle(workflow_id).fetch_history()
        raw = history.to_json()
        assert "Zanzibarian" not in raw and "carol" not in raw, workflow_id


async def test_task_guidance_repeated_in_three_sessions_is_staged_as_a_preference(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    t = tenant()
    headers = stack.auth(t, "dana")
    said = [
        "For this ticket, keep the reply very short.",
        "For this email, keep it brief please.",
        "In this reply, be concise.",
    ]
    answers = []
    for n, text in enumerate(said):
        answers.append(await send(http, headers, f"s-{n}", [{"role": "user", "content": text, "turn_id": f"u{n}"}]))
    assert [len(a["candidates"]) for a in answers[:2]] == [1, 1], "twice is not yet a habit"
    third = answers[2]["candidates"]
    assert [(c["kind"], c["type"], c["decision"]) for c in third] == [
        ("task_guidance", "task", "ADD"),
        ("repeated_guidance", "preference", "PENDING"),
    ], third
    staged = await stack.deps.store.get_memory(t, third[1]["memory_id"])
    assert staged is not None and staged.status is Status.PENDING and staged.slot == "pref.reply_length"
    assert staged.content == "Be concise.", staged.content
    assert third[1]["reason"] == "staged_inferred_preference"


async def test_near_duplicate_episodes_of_a_session_are_consolidated_into_its_summary(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    t = tenant()
    messages = [
        {"role": "user", "content": "Yesterday I ran my first half marathon in Pune.", "turn_id": "u1"},
        {"role": "user", "content": "Yesterday I finished the half marathon, my legs are sore.", "turn_id": "u2"},
        {"role": "user", "content": "Last week I adopted a kitten from the shelter.", "turn_id": "u3"},
    ]
    body = await send(http, stack.auth(t, "erin"), "s-episodes", messages)
    episodes = [c for c in body["candidates"] if c["type"] == "episodic" and c["decision"] == "ADD"]
    assert len(episodes) == 3, body
    assert body["summary_id"] is not None
    summary = await stack.deps.store.get_memory(t, body["summary_id"])
    assert summary is not None and summary.type.value == "summary" and summary.slot.startswith("summary.session.")
    [(found, lineage)] = await summaries_touching(stack.deps.store, t, [episodes[0]["memory_id"]])
    assert found.id == summary.id
    assert sorted(lineage) == sorted(e["memory_id"] for e in episodes[:2]), "only the near-duplicates"

    # Forgetting one source re-derives the session's summary from what remains, in the session's own slot.
    headers = stack.auth(t, "erin")
    gone = await http.delete(f"/v1/memories/{episodes[0]['memory_id']}", headers=headers)
    assert gone.status_code == 202, gone.text
    deletion = gone.json()["deletion_id"]
    for _ in range(300):
        status = (await http.get(f"/v1/deletions/{deletion}", headers=headers)).json()["status"]
        if status == "verified":
            break
        await asyncio.sleep(0.1)
    assert status == "verified"
    old = await stack.deps.store.get_memory(t, summary.id)
    assert old is not None and old.content is None, "the old version is purged"
    touching = await summaries_touching(stack.deps.store, t, [episodes[1]["memory_id"]])
    [(rederived, lineage)] = [(r, lineage) for r, lineage in touching if r.content is not None]
    assert rederived.id != summary.id and rederived.slot == summary.slot and rederived.content is not None
    assert lineage == [episodes[1]["memory_id"]]


async def test_bad_input_is_a_problem_naming_the_field(stack: Stack, http: httpx.AsyncClient) -> None:
    t = tenant()
    headers = stack.auth(t, "fred")
    ok = [{"role": "user", "content": "I live in Oslo."}]
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"messages": ok}, 422, "session_id"),
        ({"session_id": "s", "messages": []}, 422, "messages"),
        ({"session_id": "s", "messages": [{"role": "narrator", "content": "x"}]}, 422, "messages.0.role"),
        ({"session_id": "s", "messages": [{"role": "user", "content": "   "}]}, 422, "messages.0.content"),
        ({"session_id": "s", "messages": [{"role": "user", "content": "x" * 5000}]}, 413, "messages.0.content"),
        (
            {"session_id": "s", "messages": [{"role": "user", "content": "hi", "timestamp": "2026-12-01T10:00:00"}]},
            422,
            "messages.0.timestamp",
        ),
    ]
    for body, status, field in cases:
        answer = await http.post("/v1/conversations", headers=headers, json=body)
        assert_problem(answer, status, field=field)
    for message in (
        {"role": "user", "content": "tea\u0000coffee"},
        {"role": "user", "content": "x", "turn_id": "\u0000"},
    ):
        answer = await http.post("/v1/conversations", headers=headers, json={"session_id": "s", "messages": [message]})
        assert_problem(answer, 422)
    raws = [
        json.dumps({"session_id": "s", "messages": [{"role": "user", "content": "I live in \ud800 Oslo."}]}).encode(),
        json.dumps({"session_id": "s\ud800", "messages": ok}).encode(),
        json.dumps({"session_id": "s" * 10_000, "messages": ok}).encode(),
        json.dumps({"session_id": "s", "messages": ok * 201}).encode(),
        json.dumps({"session_id": "s", "messages": [{"role": "user", "content": {"nested": ["deep"] * 100}}]}).encode(),
        json.dumps({"session_id": "s", "messages": "I live in Oslo."}).encode(),
    ]
    for raw in raws:
        answer = await http.post(
            "/v1/conversations", headers=headers | {"Content-Type": "application/json"}, content=raw
        )
        assert 400 <= answer.status_code < 500, f"{answer.status_code} for {raw[:60]!r}: {answer.text[:300]}"
        assert_problem(answer, answer.status_code)
    operator = await http.post(
        "/v1/conversations", headers=stack.auth(t, "op", role="operator"), json={"session_id": "s", "messages": ok}
    )
    assert_problem(operator, 403, code="role_cannot_write")
    listed = await http.get("/v1/memories", headers=headers)
    assert listed.status_code == 200 and listed.json()["items"] == [], "a refused conversation stores nothing"


async def test_the_route_has_a_span_and_metrics_with_counts_only(stack: Stack, http: httpx.AsyncClient) -> None:
    t = tenant()
    text = "I really love Quetzalcoatlus fossils."
    messages = [{"role": "user", "content": text}, {"role": "user", "content": "What time is it?"}]
    body = await send(http, stack.auth(t, "gina"), "s-span", messages)
    spans = [
        s
        for s in SPANS.get_finished_spans()
        if s.name.startswith("remember_conversation") and (s.attributes or {}).get("memwarden.tenant") == t
    ]
    [span] = spans
    attrs = dict(span.attributes or {})
    assert attrs["memwarden.candidates.count"] == 1 and attrs["memwarden.candidates.stored"] == 1
    assert attrs["memwarden.extractor"] == "rules-v1" and attrs["memwarden.workflow.id"] == body["workflow_id"]
    assert not any("Quetzalcoatlus" in str(v) for v in attrs.values())
    metrics = (await http.get("/metrics")).text
    lines = metrics.splitlines()
    assert any(
        line.startswith("memwarden_conversations_total{") and 'extractor="rules-v1"' in line for line in lines
    ), metrics
    assert any(
        line.startswith("memwarden_conversation_candidates_total{")
        and 'decision="ADD"' in line
        and 'kind="preference"' in line
        for line in lines
    ), metrics
    assert "Quetzalcoatlus" not in metrics


async def test_a_conversation_whose_owner_is_gone_leaves_nothing_parked(stack: Stack) -> None:
    """The owner erased between parking and extraction (their handle deleted): the run fails, nothing is
    stored, and the parked messages are dropped all the same."""
    t = tenant()
    target = ConversationTarget(t, "hana", Scope.USER, None, None, "user:hana", "pseudonym-h")
    messages = [Message(role=MessageRole.USER, content="I live in Quito.")]
    request = await park_conversation(
        stack.deps.store, stack.settings.key_for(Purpose.SUBJECT_HANDLES), target, "s-gone", messages
    )
    await stack.deps.store.delete_candidate(request.subject_ref)
    with pytest.raises(WorkflowFailureError):
        await stack.client.execute_workflow(
            ConversationWorkflow.run,
            args=[request, stack.settings.gate_policy],
            id=conversation_workflow_id(request),
            task_queue=stack.settings.temporal_task_queue,
        )
    assert await stack.deps.store.get_candidate(request.conversation_ref) is None
    events, _ = await stack.deps.store.list_audit(t, limit=10, cursor=None, oldest_first=True)
    assert [e for e in events if e.memory_id] == []


async def test_the_python_client_hands_over_a_conversation(stack: Stack) -> None:
    t = tenant()
    token = stack.auth(t, "ivan")["Authorization"].removeprefix("Bearer ")
    async with MemwardenClient(stack.base_url, token) as mw:
        answer = await mw.remember_conversation("s-client", [{"role": "user", "content": "I'm a vegan."}])
        assert [(c["kind"], c["decision"]) for c in answer["candidates"]] == [("preference", "ADD")]
        with pytest.raises(MemwardenError) as refused:
            await mw.remember_conversation("s-client", [])
    assert refused.value.status == 422
