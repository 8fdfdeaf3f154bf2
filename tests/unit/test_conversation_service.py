"""memwarden.services.conversations: the ids that make a resend store nothing twice, and what is parked."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from activities.conversation import candidate_memory_id, durable_form
from memwarden.extract.base import Message
from memwarden.records import MessageRole, Scope
from memwarden.services.conversations import ConversationTarget, conversation_workflow_id, park_conversation
from memwarden.stores.sql import SqlStore

KEY = b"k" * 32
ALICE = ConversationTarget("t1", "alice", Scope.USER, None, None, "user:alice", "pseudonym-a")
TURNS = [Message(role=MessageRole.USER, content="I live in Oslo."), Message(role=MessageRole.USER, content="Hi")]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlStore]:
    opened = await SqlStore.open(f"sqlite+aiosqlite:///{tmp_path / 'db.sqlite'}")
    await opened.migrate()
    try:
        yield opened
    finally:
        await opened.close()


async def test_the_same_conversation_names_the_same_workflow_and_memories(store: SqlStore) -> None:
    first = await park_conversation(store, KEY, ALICE, "s1", TURNS)
    again = await park_conversation(store, KEY, ALICE, "s1", TURNS)
    assert conversation_workflow_id(first) == conversation_workflow_id(again)
    assert first.namespace_key == again.namespace_key and first.session_key == again.session_key
    assert first.subject_ref != again.subject_ref, "each run gets its own handle"
    other_session = await park_conversation(store, KEY, ALICE, "s2", TURNS)
    longer = await park_conversation(store, KEY, ALICE, "s1", [*TURNS, Message(role=MessageRole.USER, content="x y z")])
    bob = ConversationTarget("t1", "bob", Scope.USER, None, None, "user:bob", "pseudonym-b")
    as_bob = await park_conversation(store, KEY, bob, "s1", TURNS)
    ids = {conversation_workflow_id(r) for r in (first, other_session, longer, as_bob)}
    assert len(ids) == 4
    assert len({first.namespace_key, other_session.namespace_key, as_bob.namespace_key}) == 3
    assert longer.namespace_key == first.namespace_key, "a longer send of the session keeps its memory ids"


async def test_what_is_parked_and_what_the_input_holds(store: SqlStore) -> None:
    request = await park_conversation(store, KEY, ALICE, "s1", TURNS)
    raw = await store.get_candidate(request.conversation_ref)
    assert raw is not None
    body = json.loads(raw)
    assert body["session_id"] == "s1" and [m["content"] for m in body["messages"]] == ["I live in Oslo.", "Hi"]
    handle = await store.get_candidate(request.subject_ref)
    assert handle is not None and json.loads(handle) == {"owner_id": "alice", "writer": "user:alice"}
    sealed = request.model_dump_json()
    assert "Oslo" not in sealed and "alice" not in sealed and "s1" not in sealed.replace(request.conversation_ref, "")
    # The turn key is keyed: the same text under another key is another turn.
    other = await park_conversation(store, b"j" * 32, ALICE, "s1", TURNS)
    turns = [m["turn_key"] for m in json.loads(await store.get_candidate(other.conversation_ref) or "{}")["messages"]]
    assert turns != [m["turn_key"] for m in body["messages"]]


def test_candidate_ids_and_the_durable_form_of_guidance() -> None:
    assert candidate_memory_id("ns", "turn", 0) == candidate_memory_id("ns", "turn", 0)
    assert len({candidate_memory_id("ns", "turn", 0), candidate_memory_id("ns", "turn", 1)}) == 2
    assert durable_form("For this ticket, keep the reply very short.") == "Keep the reply very short."
    assert durable_form("In this reply, be concise") == "Be concise."
