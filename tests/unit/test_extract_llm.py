"""The LLM extractor against a fake OpenAI-compatible server over real HTTP (tests/llm_server.py).

What is checked: the request speaks the protocol (model, bearer key, strict json_schema structured output,
no system prompt of the conversation sent), the model's proposals are bounded by what it may not decide
(the source kind comes from the role, slots are sanitised, deadlines become TTLs, indexes outside the
conversation are dropped), failures are retried then reported without content, and nothing of the
conversation is logged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from memwarden.extract.base import Kind, Lifetime, Message
from memwarden.extract.llm import ExtractionFailed, LlmExtractor
from memwarden.records import MemoryType, MessageRole, SourceKind, WriteReason
from tests.llm_server import FakeChatCompletions

SENT = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)
MESSAGES = [
    Message(role=MessageRole.SYSTEM, content="You are terse. Internal prompt words."),
    Message(role=MessageRole.USER, content="I moved to Pune, and my visa interview is on 2026-12-10."),
    Message(role=MessageRole.ASSISTANT, content="I've booked a cab for you."),
]


def candidate(**fields: Any) -> dict[str, Any]:
    base = {"message_index": 1, "content": "x", "type": "fact", "lifetime": "durable", "kind": "fact"}
    return base | {"slot": None, "deadline": None} | fields


@pytest.fixture
def llm() -> Iterator[FakeChatCompletions]:
    with FakeChatCompletions() as server:
        yield server


def extractor(llm: FakeChatCompletions, **kw: Any) -> LlmExtractor:
    return LlmExtractor(llm.base_url, "fake-model", "test-key", backoff_seconds=0.01, **kw)


async def test_proposals_are_bounded_by_what_the_model_may_not_decide(llm: FakeChatCompletions) -> None:
    answer = {
        "candidates": [
            candidate(content="I moved to Pune", slot="location", kind="correction"),
            candidate(content="Visa interview", type="task", lifetime="deadline", kind="plan", deadline="2026-12-10"),
            # The model files the assistant's words as a preference of the person: the role says otherwise.
            candidate(message_index=2, content="Booked a cab", type="episodic", lifetime="episode", kind="episode"),
            candidate(message_index=9, content="invented"),
            candidate(message_index=0, content="from the system prompt"),
            candidate(content="bad slot", slot="a slot; DROP TABLE"),
        ]
    }
    llm.set(answer=lambda _body: answer)
    found = await extractor(llm).extract(MESSAGES, SENT)
    assert [p.content for p in found] == ["I moved to Pune", "Visa interview", "Booked a cab", "bad slot"]
    moved, visa, cab, bad = found
    assert (moved.source_kind, moved.slot, moved.kind, moved.reason) == (
        SourceKind.USER,
        "location",
        Kind.CORRECTION,
        WriteReason.USER_STATED_FACT,
    )
    assert visa.type is MemoryType.TASK and visa.lifetime is Lifetime.DEADLINE
    assert visa.ttl_seconds == int((datetime(2026, 12, 10, 23, 59, 59, tzinfo=UTC) - SENT).total_seconds()) + 86400
    assert cab.source_kind is SourceKind.MODEL and cab.confirm_requested and cab.reason is WriteReason.TASK_OUTCOME
    assert bad.slot is None

    [request] = llm.requests
    assert request["model"] == "fake-model" and request["temperature"] == 0
    assert request["response_format"]["type"] == "json_schema"
    assert request["response_format"]["json_schema"]["strict"] is True
    sent = request["messages"][1]["content"]
    assert "Pune" in sent and "Internal prompt words" not in sent, "system turns are not the conversation"


async def test_failures_are_retried_then_reported_without_content(llm: FakeChatCompletions) -> None:
    llm.set(fail_next=1, malformed_next=1, answer=lambda _b: {"candidates": [candidate(content="I moved to Pune")]})
    found = await extractor(llm, retries=2).extract(MESSAGES, SENT)
    assert [p.content for p in found] == ["I moved to Pune"] and len(llm.requests) == 3

    llm.set(fail_next=5)
    with pytest.raises(ExtractionFailed) as failed:
        await extractor(llm, retries=1).extract(MESSAGES, SENT)
    assert "500" in str(failed.value) and "Pune" not in str(failed.value)
    assert len(llm.requests) == 5


async def test_a_slow_endpoint_times_out_and_a_wrong_key_is_refused(llm: FakeChatCompletions) -> None:
    llm.set(delay_next=2, delay=1.0)
    with pytest.raises(ExtractionFailed, match="timed out after 2 attempts"):
        await extractor(llm, timeout_seconds=0.2, retries=1).extract(MESSAGES, SENT)
    with pytest.raises(ExtractionFailed, match="401"):
        await LlmExtractor(llm.base_url, "m", "wrong", retries=0).extract(MESSAGES, SENT)


async def test_the_conversation_is_never_logged(llm: FakeChatCompletions, caplog: pytest.LogCaptureFixture) -> None:
    llm.set(answer=lambda _b: {"candidates": [candidate(content="I moved to Pune")]})
    with caplog.at_level(logging.DEBUG):
        await extractor(llm).extract(MESSAGES, SENT)
        llm.set(fail_next=3)
        with pytest.raises(ExtractionFailed):
            await extractor(llm, retries=2).extract(MESSAGES, SENT)
    assert caplog.records, "httpx logs its requests at this level: the check below is not vacuous"
    assert "Pune" not in caplog.text and "visa" not in caplog.text.lower()


async def test_a_conversation_of_system_turns_asks_nothing(llm: FakeChatCompletions) -> None:
    assert await extractor(llm).extract(MESSAGES[:1], SENT) == []
    assert llm.requests == []
