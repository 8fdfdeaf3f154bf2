"""The extractor protocol and what it proposes.

Why a protocol: the service must run offline (rules) and may use a model (an OpenAI-compatible endpoint);
the workflow, the gate and the audit are the same for both, so both hand back the same `Proposal`.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field

from memwarden.records import MemoryType, MessageRole, Sensitivity, SourceKind, WriteReason


class Message(BaseModel):
    """One turn of a conversation as the caller sent it."""

    model_config = ConfigDict(extra="forbid")

    role: MessageRole
    content: str = Field(min_length=1)
    timestamp: datetime | None = None
    turn_id: str | None = Field(default=None, min_length=1, max_length=128)


class Lifetime(StrEnum):
    """How long a proposal should live, as a careful note-taker would say it."""

    DURABLE = "durable"
    """Until it changes (preferences, facts about the person): the type's retention, no expiry by date."""
    TASK = "task"
    """For the task at hand only: a `task` memory that expires with the task type's lifetime."""
    DEADLINE = "deadline"
    """A plan or deadline: kept until its date has passed (`ttl_seconds`)."""
    EPISODE = "episode"
    """Something that happened: the episodic type's retention."""


class Kind(StrEnum):
    PREFERENCE = "preference"
    FACT = "fact"
    PLAN = "plan"
    CORRECTION = "correction"
    TASK_GUIDANCE = "task_guidance"
    EPISODE = "episode"
    REPEATED_GUIDANCE = "repeated_guidance"


class Proposal(BaseModel):
    """One candidate memory: the text to remember and how to file it. The gate judges it."""

    message_index: int
    content: str = Field(min_length=1)
    type: MemoryType
    lifetime: Lifetime
    kind: Kind
    source_kind: SourceKind
    reason: WriteReason
    slot: str | None = None
    importance: float | None = None
    ttl_seconds: int | None = None
    sensitivity: Sensitivity = Sensitivity.LOW
    confirm_requested: bool = False
    guidance_key: str | None = None
    """For task guidance: what it is about (`reply_length`, `tone`, ...), so a repeat in another session is
    recognised without comparing text."""


class Extractor(Protocol):
    """Turns messages into proposals. Deterministic for the same input (rules) or retried (a model)."""

    name: str

    async def extract(self, messages: list[Message]) -> list[Proposal]: ...


SOURCE_OF_ROLE: dict[MessageRole, SourceKind] = {
    MessageRole.USER: SourceKind.USER,
    MessageRole.ASSISTANT: SourceKind.MODEL,
    MessageRole.TOOL: SourceKind.TOOL,
}
"""Only the person's own turns are their statements; the assistant's are a model's, a tool's are untrusted.
System turns are the agent's prompt, not the conversation: nothing is extracted from them."""


REASON_OF_SOURCE: dict[SourceKind, WriteReason] = {
    SourceKind.MODEL: WriteReason.TASK_OUTCOME,
    SourceKind.TOOL: WriteReason.TOOL_OBSERVATION_UNVERIFIED,
}
