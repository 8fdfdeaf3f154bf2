"""An extractor that asks any OpenAI-compatible chat-completions endpoint for candidates.

Why: rules miss what is said in ways nobody anticipated; a model reads more. It only proposes, as the
rules do: the gate judges every proposal, and what the model may not decide, it does not:

- the source kind comes from the message's role (a model cannot make the assistant's words the person's);
- the write reason follows from the type and the source, the slot is sanitised, a deadline becomes a TTL
  from the message's own time, and a proposal naming a message that does not exist is dropped.

Structured output (`response_format: json_schema`, strict) asks for exactly `SCHEMA`; an answer that does
not parse into it counts as a failure. Each call has a timeout; failures (transport, a non-2xx status, a
malformed answer) are retried `retries` times with a short backoff, then `ExtractionFailed` (the activity
is retried by Temporal after that). Nothing of the conversation is logged, and exceptions name status codes
and counts only.
"""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ValidationError

from memwarden.config import Settings
from memwarden.extract.base import SOURCE_OF_ROLE, Kind, Lifetime, Message, Proposal
from memwarden.extract.rules import DEADLINE_GRACE_SECONDS, guidance_key
from memwarden.records import MemoryType, MessageRole, SourceKind, WriteReason

NAME = "llm-v1"
_SLOT = re.compile(r"^[A-Za-z0-9_.:-]{1,128}$")
TOOL_TYPES = frozenset({MemoryType.FACT, MemoryType.EPISODIC, MemoryType.TASK})

INSTRUCTIONS = """You read a conversation between a person (role "user"), an assistant and tools, and list \
what a careful note-taker would remember about the person for future conversations. Each candidate is one \
short statement, in the words of the conversation, from exactly one message (give its index).
- type "preference": likes, dislikes, habits, diets, standing directions to the assistant; lifetime "durable".
- type "fact": who the person is, where they live and work, family, pets, health, skills; lifetime "durable".
- type "task", lifetime "deadline": plans, appointments and deadlines with a date; give the date as \
"deadline" (YYYY-MM-DD). Undated plans: lifetime "task".
- type "task", lifetime "task", kind "task_guidance": guidance for the task at hand only ("for this email, be \
formal"); never a durable preference.
- type "episodic", lifetime "episode": dated events in the person's life; completed actions the assistant \
or a tool reports.
- kind "correction" when the message corrects an earlier statement; give the slot it corrects.
- slot: a dotted attribute name when the attribute holds one value (location, origin, job.employer, \
job.title, name, age, birthday, diet, relationship.status, family.<relation>.name, favorite.<thing>), \
else null.
Nothing from questions, requests for this turn, small talk, hypotheticals, what others said or think, \
failed tool output or system prompts. Return {"candidates": []} when there is nothing."""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["candidates"],
    "properties": {
        "candidates": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["message_index", "content", "type", "lifetime", "kind", "slot", "deadline"],
                "properties": {
                    "message_index": {"type": "integer"},
                    "content": {"type": "string"},
                    "type": {"type": "string", "enum": ["preference", "fact", "episodic", "task"]},
                    "lifetime": {"type": "string", "enum": ["durable", "task", "deadline", "episode"]},
                    "kind": {
                        "type": "string",
                        "enum": ["preference", "fact", "plan", "correction", "task_guidance", "episode"],
                    },
                    "slot": {"type": ["string", "null"]},
                    "deadline": {"type": ["string", "null"]},
                },
            },
        }
    },
}


class ExtractionFailed(Exception):
    """The endpoint gave no usable answer within the retries (the message names no content)."""


class _Candidate(BaseModel):
    message_index: int
    content: str
    type: Literal["preference", "fact", "episodic", "task"]
    lifetime: Literal["durable", "task", "deadline", "episode"]
    kind: Literal["preference", "fact", "plan", "correction", "task_guidance", "episode"]
    slot: str | None = None
    deadline: str | None = None


class _Answer(BaseModel):
    candidates: list[_Candidate]


class LlmExtractor:
    """Calls `{base_url}/chat/completions`; one request per conversation."""

    name = NAME

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        timeout_seconds: float = 20.0,
        retries: int = 2,
        backoff_seconds: float = 0.5,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout = timeout_seconds
        self.retries = retries
        self.backoff = backoff_seconds
        self.transport = transport

    @classmethod
    def from_settings(cls, settings: Settings) -> LlmExtractor:
        if not settings.extract_llm_base_url:
            raise ValueError("MEMWARDEN_EXTRACTOR=llm needs MEMWARDEN_EXTRACT_LLM_BASE_URL")
        return cls(
            settings.extract_llm_base_url,
            settings.extract_llm_model,
            settings.extract_llm_api_key,
            timeout_seconds=settings.extract_llm_timeout_seconds,
            retries=settings.extract_llm_retries,
        )

    def request_body(self, messages: list[Message]) -> dict[str, Any]:
        numbered = [
            {"index": i, "role": m.role.value, "content": m.content}
            for i, m in enumerate(messages)
            if m.role is not MessageRole.SYSTEM
        ]
        return {
            "model": self.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": INSTRUCTIONS},
                {"role": "user", "content": json.dumps({"conversation": numbered}, ensure_ascii=False)},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "memory_candidates", "strict": True, "schema": SCHEMA},
            },
        }

    async def _ask(self, client: httpx.AsyncClient, body: dict[str, Any]) -> _Answer:
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        response = await client.post(self.url, json=body, headers=headers)
        if response.status_code // 100 != 2:
            raise ExtractionFailed(f"chat completions answered {response.status_code}")
        try:
            content = response.json()["choices"][0]["message"]["content"]
            return _Answer.model_validate_json(content)
        except (KeyError, IndexError, TypeError, ValueError, ValidationError):
            raise ExtractionFailed("chat completions answered outside the schema") from None

    async def extract(self, messages: list[Message], received_at: datetime | None = None) -> list[Proposal]:
        if not any(m.role is not MessageRole.SYSTEM for m in messages):
            return []
        body = self.request_body(messages)
        failure = "no attempt"
        async with httpx.AsyncClient(timeout=self.timeout, transport=self.transport) as client:
            for attempt in range(self.retries + 1):
                if attempt:
                    await asyncio.sleep(self.backoff * attempt)
                try:
                    answer = await self._ask(client, body)
                except ExtractionFailed as exc:
                    failure = str(exc)
                    continue
                except httpx.TimeoutException:
                    failure = "chat completions timed out"
                    continue
                except httpx.HTTPError as exc:
                    failure = f"chat completions unreachable ({type(exc).__name__})"
                    continue
                return self._proposals(answer, messages, received_at or datetime.now(UTC))
        raise ExtractionFailed(f"{failure} after {self.retries + 1} attempts")

    @staticmethod
    def _proposals(answer: _Answer, messages: list[Message], received_at: datetime) -> list[Proposal]:
        out: list[Proposal] = []
        for c in answer.candidates:
            if not 0 <= c.message_index < len(messages) or not c.content.strip():
                continue
            message = messages[c.message_index]
            source = SOURCE_OF_ROLE.get(message.role)
            if source is None:
                continue  # a system prompt is not the conversation
            memory_type = MemoryType(c.type)
            if source is SourceKind.TOOL and memory_type not in TOOL_TYPES:
                memory_type = MemoryType.FACT
            if source is SourceKind.USER:
                reason = (
                    WriteReason.USER_EXPLICIT_PREFERENCE
                    if memory_type is MemoryType.PREFERENCE or c.kind == "task_guidance"
                    else WriteReason.USER_STATED_FACT
                )
            elif source is SourceKind.TOOL:
                reason = WriteReason.TOOL_OBSERVATION_UNVERIFIED
            else:
                reason = WriteReason.TASK_OUTCOME
            ref = (message.timestamp or received_at).astimezone(UTC)
            ttl = None
            lifetime = Lifetime(c.lifetime)
            if lifetime is Lifetime.DEADLINE:
                ttl = _ttl(c.deadline, ref)
                if ttl is None:
                    lifetime = Lifetime.TASK
            kind = Kind(c.kind)
            out.append(
                Proposal(
                    message_index=c.message_index,
                    content=c.content.strip(),
                    type=memory_type,
                    lifetime=lifetime,
                    kind=kind,
                    source_kind=source,
                    reason=reason,
                    slot=c.slot if c.slot and _SLOT.match(c.slot) and kind is not Kind.TASK_GUIDANCE else None,
                    ttl_seconds=ttl,
                    confirm_requested=source is SourceKind.MODEL,
                    guidance_key=guidance_key(c.content) if kind is Kind.TASK_GUIDANCE else None,
                )
            )
        return out


def _ttl(deadline: str | None, ref: datetime) -> int | None:
    if not deadline:
        return None
    try:
        day = datetime.fromisoformat(deadline[:10]).replace(hour=23, minute=59, second=59, tzinfo=UTC)
    except ValueError:
        return None
    seconds = int((day - ref).total_seconds())
    return seconds + DEADLINE_GRACE_SECONDS if seconds > 0 else None
