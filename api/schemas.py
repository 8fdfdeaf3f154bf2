"""Request and response bodies of the v1 contract (ARCHITECTURE.md, HTTP API)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from memwarden.records import (
    Consequence,
    Decision,
    Freshness,
    MemoryRecord,
    MemoryType,
    MessageRole,
    Provenance,
    Scope,
    Sensitivity,
    SourceKind,
    SourceRef,
    Status,
)


class RememberOut(BaseModel):
    decision: Decision
    reason: str
    memory_id: str | None = None
    supersedes: str | None = None
    workflow_id: str


class SearchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1)
    k: int | None = Field(default=None, ge=1)
    types: list[MemoryType] | None = Field(default=None, min_length=1)
    max_sensitivity: Sensitivity | None = Field(
        default=None, description="Only memories at or below this sensitivity (public < low < ... < restricted)."
    )
    consequence: Consequence = Consequence.LOW
    session: str | None = Field(
        default=None,
        max_length=128,
        pattern=r"^[A-Za-z0-9_.:-]+$",
        description="The conversation session asking (an id): recorded with the read, for blast-radius reviews.",
    )


class SearchResultOut(BaseModel):
    memory_id: str
    content: str
    type: MemoryType
    slot: str | None
    score: float
    freshness: Freshness
    source_kind: SourceKind
    source_ref: SourceRef | None
    created_at: datetime
    last_confirmed_at: datetime | None
    label: str


class WithheldOut(BaseModel):
    memory_id: str
    reason: str


class SearchOut(BaseModel):
    results: list[SearchResultOut]
    withheld: list[WithheldOut]
    context: str
    workflow_id: str


class MemoryOut(BaseModel):
    """A memory as its owner sees it; content is null once purged."""

    id: str
    owner_id: str
    scope: Scope
    agent_id: str | None
    store: str | None
    type: MemoryType
    slot: str | None
    content: str | None
    content_hash: str
    source_kind: SourceKind
    source_ref: SourceRef | None
    provenance: Provenance
    reason: str
    importance: float
    confidence: float
    sensitivity: Sensitivity
    status: Status
    expires_at: datetime | None
    last_confirmed_at: datetime | None
    last_used_at: datetime | None
    supersedes: str | None
    superseded_by: str | None
    version: int
    policy_version: str
    created_at: datetime
    updated_at: datetime
    tombstoned_at: datetime | None
    purged_at: datetime | None

    @classmethod
    def of(cls, record: MemoryRecord) -> MemoryOut:
        return cls.model_validate(record.model_dump())


class MemoryPage(BaseModel):
    items: list[MemoryOut]
    next_cursor: str | None


class MemoryDetail(MemoryOut):
    history: list[MemoryOut] = Field(default_factory=list, description="Earlier versions, newest first.")


class SettingsIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    memory_enabled: StrictBool = Field(description="Off stops new memories and reads; it deletes nothing.")


class SettingsOut(BaseModel):
    memory_enabled: bool


class MemoryPatchIn(BaseModel):
    """`PATCH /v1/memories/{id}`: the owner's correction. The new text goes through the write gate as a
    statement of the owner's (source `user`) and supersedes the memory in its slot chain."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(min_length=1)
    reason: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="Write reason; default the memory's own if it fits a user, else user_stated_fact "
        "(user_explicit_preference for preferences).",
    )
    importance: float | None = Field(default=None, ge=0.0, le=1.0, description="Default: the memory's own.")
    sensitivity: Sensitivity | None = Field(default=None, description="Default: the memory's own.")
    expected_version: int | None = Field(
        default=None, ge=1, description="Optimistic concurrency: 409 version_conflict if the memory has changed."
    )
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=128)


class MessageIn(BaseModel):
    """One turn of a conversation: who spoke (`user`, `assistant`, `tool`, `system`) and what they said."""

    model_config = ConfigDict(extra="forbid")

    role: MessageRole
    content: str = Field(min_length=1)
    timestamp: datetime | None = None
    turn_id: str | None = Field(default=None, min_length=1, max_length=128)


class ConversationIn(BaseModel):
    """`POST /v1/conversations`: a conversation to remember from, and where its memories go (as for a write)."""

    model_config = ConfigDict(extra="forbid")

    session_id: str = Field(min_length=1, max_length=128)
    messages: list[MessageIn] = Field(min_length=1)
    scope: Scope = Scope.USER
    store: str | None = Field(default=None, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
    owner_id: str | None = Field(default=None, min_length=1, max_length=256)


class ConversationCandidateOut(BaseModel):
    """One candidate the extractor proposed and the gate decided, with the message it came from."""

    message_index: int
    turn_id: str | None = None
    kind: str
    """What the extractor proposed (`preference`, `fact`, ...), or `message` for a message the API refused
    to park (a secret): nothing was extracted from it, and its `type` is null."""
    type: MemoryType | None = None
    decision: Decision
    reason: str
    memory_id: str | None = None
    supersedes: str | None = None
    workflow_id: str | None = None


class ConversationOut(BaseModel):
    workflow_id: str
    status: str
    """`done`, or `running` when the answer took longer than the API waits (send again for it)."""
    extractor: str | None = None
    candidates: list[ConversationCandidateOut] = Field(default_factory=list)
    summary_id: str | None = None
