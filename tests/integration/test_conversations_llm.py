"""`POST /v1/conversations` with the LLM extractor, against a fake OpenAI-compatible server (real HTTP).

The gate stays the judge of what the model proposes: a secret it lifts from the conversation is rejected,
the assistant's words it files stay the model's (staged for the person), and a proposal the model invents
for a message that does not exist is never proposed at all.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from tests.llm_server import FakeChatCompletions
from tests.stack_support import Stack, embedded_stack


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeChatCompletions]:
    with FakeChatCompletions() as server:
        yield server


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory, llm: FakeChatCompletions) -> AsyncIterator[Stack]:
    async with embedded_stack(
        tmp_path_factory.mktemp("conversations-llm"),
        extractor="llm",
        extract_llm_base_url=llm.base_url,
        extract_llm_api_key="test-key",
        extract_llm_model="fake-model",
    ) as s:
        yield s


def note(index: int, content: str, **fields: Any) -> dict[str, Any]:
    return {"message_index": index, "content": content, "type": "fact", "lifetime": "durable", "kind": "fact"} | {
        "slot": None,
        "deadline": None,
        **fields,
    }


async def test_the_gate_judges_what_the_model_proposes(stack: Stack, llm: FakeChatCompletions) -> None:
    secret = "AKIAIOSFODNN7EXAMPLE"
    messages = [
        {"role": "user", "content": "I live in Lisbon. My AWS key is " + secret, "turn_id": "u1"},
        {"role": "assistant", "content": "Noted! I booked your flight to Porto for Friday.", "turn_id": "a1"},
    ]
    llm.set(
        answer=lambda _body: {
            "candidates": [
                note(0, "I live in Lisbon", slot="location"),
                note(0, f"My AWS key is {secret}"),
                note(1, "Prefers flying to Porto", type="preference", kind="preference"),
                note(7, "invented"),
            ]
        }
    )
    t = f"t-{uuid.uuid4().hex[:8]}"
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=120) as http:
        answer = await http.post(
            "/v1/conversations", headers=stack.auth(t, "alice"), json={"session_id": "s", "messages": messages}
        )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["extractor"] == "llm-v1"
    got = [(c["message_index"], c["decision"], c["reason"]) for c in body["candidates"]]
    assert got == [
        (0, "ADD", "accepted"),
        (0, "REJECT", "secret_detected"),
        (1, "PENDING", "staged_model_inference"),
    ], got
    staged = await stack.deps.store.get_memory(t, body["candidates"][2]["memory_id"])
    assert staged is not None and staged.source_kind.value == "model"
    request = llm.requests[-1]
    assert request["response_format"]["json_schema"]["strict"] is True
