"""The memory record, its status machine and the shapes that cross process boundaries.

Pure pydantic: importable from Temporal workflow code (sandbox-safe, no I/O, no clock).
Everything here is what ARCHITECTURE.md names "the memory record"; adapters map it to rows,
points and cache entries, and every derivative carries the record's `id` as lineage.
"""

from __future__ import annotations

import hashlib
from datetime import datetime
from enum import StrEnum
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

POLICY_VERSION = "2026-12-02.1"
"""Stamped on every record and audit event so a decision can be traced to the rules that made it."""


class Scope(StrEnum):
    """Which namespace a memory lives in: the person's, one agent's private store, or a shared store."""

    USER = "user"
    AGENT = "agent"
    SHARED = "shared"


class MemoryType(StrEnum):
    PREFERENCE = "preference"
    FACT = "fact"
    EPISODIC = "episodic"
    TASK = "task"
    PROCEDURAL = "procedural"
    SUMMARY = "summary"


class SourceKind(StrEnum):
    """Where a candidate came from; the write gate's trust decision starts here."""

    USER = "user"
    APP = "app"
    SYSTEM = "system"
    DOCUMENT = "document"
    TOOL = "tool"
    MODEL = "model"


class Sensitivity(StrEnum):
    """Ordered labels; compare with `sensitivity_rank`, never with string order."""

    PUBLIC = "public"
    LOW = "low"
    INTERNAL = "internal"
    CONFIDENTIAL = "confidential"
    RESTRICTED = "restricted"


SENSITIVITY_ORDER: tuple[Sensitivity, ...] = (
    Sensitivity.PUBLIC,
    Sensitivity.LOW,
    Sensitivity.INTERNAL,
    Sensitivity.CONFIDENTIAL,
    Sensitivity.RESTRICTED,
)


def sensitivity_rank(value: Sensitivity | str) -> int:
    """Position in the public < ... < restricted order, for range filters in every store."""
    return SENSITIVITY_ORDER.index(Sensitivity(value))


class Status(StrEnum):
    PENDING = "pending"
    ACTIVE = "active"
    STALE = "stale"
    SUPERSEDED = "superseded"
    INVALIDATED = "invalidated"
    QUARANTINED = "quarantined"
    EXPIRED = "expired"
    REJECTED = "rejected"
    TOMBSTONED = "tombstoned"
    PURGED = "purged"


LIVE_STATUSES: frozenset[Status] = frozenset({Status.ACTIVE, Status.STALE})
"""A memory's current value: it holds its slot (at most one live value per slot per namespace, a unique
index in the store), it is indexed, and it may be edited. A pending write is not live until confirmed."""

ELIGIBLE_STATUSES: frozenset[Status] = LIVE_STATUSES
"""Only live memories may be retrieved (stale ones only under the freshness policy)."""

FORGOTTEN_STATUSES: frozenset[Status] = frozenset({Status.TOMBSTONED, Status.PURGED})
"""Forgotten by a deletion: nothing may confirm, restore or index them again."""

CONTENT_GONE_STATUSES: frozenset[Status] = frozenset({Status.EXPIRED, Status.TOMBSTONED, Status.PURGED})
"""Content removed or being removed: nothing left to retain, correct or restore."""

_FORGETTABLE = frozenset(s for s in Status if s not in FORGOTTEN_STATUSES)

TRANSITIONS: dict[Status, frozenset[Status]] = {
    Status.PENDING: frozenset({Status.ACTIVE, Status.REJECTED, Status.QUARANTINED}),
    Status.ACTIVE: frozenset({Status.STALE, Status.SUPERSEDED, Status.QUARANTINED, Status.EXPIRED, Status.INVALIDATED}),
    Status.STALE: frozenset({Status.ACTIVE, Status.INVALIDATED, Status.SUPERSEDED, Status.QUARANTINED, Status.EXPIRED}),
    Status.SUPERSEDED: frozenset(),
    Status.INVALIDATED: frozenset(),
    Status.QUARANTINED: frozenset({Status.ACTIVE, Status.SUPERSEDED}),
    Status.EXPIRED: frozenset(),
    Status.REJECTED: frozenset(),
    Status.TOMBSTONED: frozenset({Status.PURGED}),
    Status.PURGED: frozenset(),
}
"""The status machine of ARCHITECTURE.md; `forget` (-> tombstoned) is allowed from any non-purged state."""


QUARANTINABLE_STATUSES: frozenset[Status] = frozenset({Status.PENDING, Status.ACTIVE, Status.STALE})
"""What a rollback may quarantine: a write that is, or may become, someone's answer. A moderator then
releases it (back to `active`, or `superseded` by a new version of its value when its slot moved on) or
forgets it."""


class InvalidTransition(ValueError):
    """A status change the machine does not allow; carries both states, never content."""

    def __init__(self, current: Status, target: Status) -> None:
        super().__init__(f"invalid status transition {current.value} -> {target.value}")
        self.current = current
        self.target = target


def can_transition(current: Status, target: Status) -> bool:
    if target is Status.TOMBSTONED:
        return current in _FORGETTABLE
    return target in TRANSITIONS[current]


def check_transition(current: Status, target: Status) -> None:
    if not can_transition(current, target):
        raise InvalidTransition(current, target)


class Decision(StrEnum):
    ADD = "ADD"
    UPDATE = "UPDATE"
    NOOP = "NOOP"
    REJECT = "REJECT"
    PENDING = "PENDING"


class Freshness(StrEnum):
    FRESH = "fresh"
    VERIFIED = "verified"
    UNVERIFIED = "unverified"
    STALE = "stale"


class Consequence(StrEnum):
    LOW = "low"
    HIGH = "high"


class WriteReason(StrEnum):
    USER_EXPLICIT_PREFERENCE = "user_explicit_preference"
    USER_STATED_FACT = "user_stated_fact"
    TASK_OUTCOME = "task_outcome"
    APP_OBSERVATION = "app_observation"
    OPERATOR_APPROVED_UPDATE = "operator_approved_update"
    TOOL_OBSERVATION_UNVERIFIED = "tool_observation_unverified"
    DERIVED_SUMMARY = "derived_summary"


class SourceRef(BaseModel):
    """Points at the system of record that owns a fact, so it can be revalidated there."""

    model_config = ConfigDict(extra="forbid")

    system: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    key: str = Field(min_length=1, max_length=256)
    version: str | None = Field(default=None, max_length=256)

    @field_validator("key")
    @classmethod
    def _one_segment(cls, value: str) -> str:
        """`.` and `..` are not record keys: an HTTP client resolves them into another path of the source."""
        if value in (".", ".."):
            raise ValueError("a source key may not be '.' or '..'")
        return value


class Provenance(BaseModel):
    """Who wrote a memory and from where: ids, and who said it in the conversation."""

    model_config = ConfigDict(extra="forbid")

    session: str | None = Field(default=None, max_length=128)
    turn: str | None = Field(default=None, max_length=128)
    span: str | None = Field(default=None, max_length=128)
    writer: str | None = Field(default=None, max_length=256)
    speaker: str | None = Field(default=None, min_length=1, max_length=128)
    """Who said it in the conversation, as the conversation names them ("Nate"): a query that names the
    speaker ranks their turns higher (`policy.ranking`). It can be a person's name, so it is treated
    like content: kept out of workflow history (the subject handle carries it, as it does the writer),
    logs and audit, and cleared when the memory is purged."""


def content_hash(content: str) -> str:
    """sha256 of the content: what logs, audit and history may carry instead of the text."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


class Namespace(BaseModel):
    """Where one memory lives. Every read filter is a set of these shapes within one tenant."""

    model_config = ConfigDict(frozen=True)

    tenant_id: str
    scope: Scope
    owner_id: str
    agent_id: str | None = None
    store: str | None = None


class Namespaced(Protocol):
    """Anything that names a namespace: a `Namespace`, a `MemoryRecord`, a `RememberInput`, a memory row."""

    @property
    def scope(self) -> str: ...
    @property
    def owner_id(self) -> str: ...
    @property
    def agent_id(self) -> str | None: ...
    @property
    def store(self) -> str | None: ...


def namespace_label(of: Namespaced) -> str:
    """How the audit log names a namespace, on every path that records an event about it (ids only).

    `user:OWNER`, `agent:AGENT:OWNER` or `shared:STORE`, by scope. The store turns the owner into a
    keyed hash on append (`memwarden.stores.audit.Pseudonymizer.namespace`, which parses this form), so
    one namespace carries one label across remember, settle, correct, revalidate and forget alike.
    """
    if of.scope == Scope.SHARED:
        return f"shared:{of.store}"
    if of.scope == Scope.AGENT:
        return f"agent:{of.agent_id}:{of.owner_id}"
    return f"user:{of.owner_id}"


class MemoryRecord(BaseModel):
    """One memory: a row in the durable store, the single source of truth."""

    id: str
    tenant_id: str
    owner_id: str
    scope: Scope = Scope.USER
    agent_id: str | None = None
    store: str | None = None
    type: MemoryType
    slot: str | None = None
    content: str | None
    content_hash: str
    source_kind: SourceKind
    source_ref: SourceRef | None = None
    provenance: Provenance = Field(default_factory=Provenance)
    reason: str
    importance: float = 0.5
    confidence: float = 1.0
    sensitivity: Sensitivity = Sensitivity.LOW
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    expires_at: datetime | None = None
    last_confirmed_at: datetime | None = None
    last_used_at: datetime | None = None
    supersedes: str | None = None
    superseded_by: str | None = None
    status: Status = Status.ACTIVE
    retention_class: str = "standard"
    policy_version: str = POLICY_VERSION
    version: int = 1
    created_at: datetime
    updated_at: datetime
    tombstoned_at: datetime | None = None
    purged_at: datetime | None = None

    @property
    def namespace(self) -> Namespace:
        return Namespace(
            tenant_id=self.tenant_id,
            scope=self.scope,
            owner_id=self.owner_id,
            agent_id=self.agent_id,
            store=self.store,
        )


class NamespaceClause(BaseModel):
    """One readable slice: equality on the fields set; None means 'not constrained'."""

    model_config = ConfigDict(frozen=True)

    scope: Scope
    owner_ids: tuple[str, ...] | None = None
    agent_id: str | None = None
    stores: tuple[str, ...] | None = None


class ReadFilter(BaseModel):
    """What a principal may read: tenant AND (any clause) AND types AND sensitivity AND status.

    Both index adapters and the SQL store translate this into their own query language, so the
    authorization happens *inside* the query that ranks, never after it.
    """

    model_config = ConfigDict(frozen=True)

    tenant_id: str
    clauses: tuple[NamespaceClause, ...]
    types: tuple[MemoryType, ...] | None = None
    max_sensitivity: Sensitivity = Sensitivity.RESTRICTED
    statuses: tuple[Status, ...] = tuple(sorted(ELIGIBLE_STATUSES))

    def admits(self, record: MemoryRecord, now: datetime | None = None) -> bool:
        """The same predicate in Python: used to re-check index hits against the durable store."""
        if record.tenant_id != self.tenant_id or record.status not in self.statuses:
            return False
        if self.types is not None and record.type not in self.types:
            return False
        if sensitivity_rank(record.sensitivity) > sensitivity_rank(self.max_sensitivity):
            return False
        if now is not None and record.expires_at is not None and record.expires_at <= now:
            return False
        return any(_clause_admits(c, record) for c in self.clauses)


def _clause_admits(clause: NamespaceClause, record: MemoryRecord) -> bool:
    if record.scope is not clause.scope:
        return False
    if clause.owner_ids is not None and record.owner_id not in clause.owner_ids:
        return False
    if clause.agent_id is not None and record.agent_id != clause.agent_id:
        return False
    return clause.stores is None or record.store in clause.stores


class IndexPoint(BaseModel):
    """What the vector index holds for one memory: vectors plus the payload its filters need."""

    memory_id: str
    tenant_id: str
    owner_id: str
    scope: Scope
    agent_id: str | None
    store: str | None
    type: MemoryType
    status: Status
    sensitivity_rank: int
    expires_at_ts: float | None
    created_at_ts: float
    importance: float
    dense: list[float]
    text: str
    """Used only to compute the BM25 sparse vector inside the adapter; never stored as payload."""


class Hit(BaseModel):
    memory_id: str
    score: float


class CandidateIn(BaseModel):
    """What an agent or user proposes (`POST /v1/memories`), validated at the API edge."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(min_length=1)
    type: MemoryType
    slot: str | None = Field(default=None, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
    source_kind: SourceKind
    source_ref: SourceRef | None = None
    reason: str = Field(min_length=1, max_length=64)
    importance: float | None = Field(default=None, ge=0.0, le=1.0)
    sensitivity: Sensitivity = Sensitivity.LOW
    scope: Scope = Scope.USER
    store: str | None = Field(default=None, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")
    ttl_seconds: int | None = Field(default=None, gt=0, le=10 * 365 * 86400)
    idempotency_key: str | None = Field(default=None, min_length=1, max_length=128)
    owner_id: str | None = Field(default=None, min_length=1, max_length=256)
    provenance: Provenance | None = None
    confirm_requested: bool = False
    """The proposer will ask the owner to confirm (required for `model` inferences, which go PENDING)."""


class RememberInput(BaseModel):
    """RememberWorkflow's input: a claim check for the content, never the content itself."""

    memory_id: str
    candidate_ref: str
    content_hash: str
    content_chars: int
    tenant_id: str
    owner_id: str
    scope: Scope
    agent_id: str | None
    store: str | None
    type: MemoryType
    slot: str | None
    source_kind: SourceKind
    source_ref: SourceRef | None
    provenance: Provenance
    reason: str
    importance: float | None
    sensitivity: Sensitivity
    ttl_seconds: int | None
    idempotency_key: str | None = None
    actor: str
    confirm_requested: bool = False
    subject_ref: str | None = None
    """A subject handle (memwarden.stores.subjects) holding `owner_id` and `provenance.writer`, which are
    then empty here: history names nobody. None when the starter carries the ids itself (tests)."""
    screening: Screening | None = None
    """The detectors' codes for this content, when the API already screened it before parking it (it
    parks only what passed). The activity reuses them only for the content whose hash is
    `content_hash`, and still decides; None: the activity screens (older histories, direct starters)."""


class RememberResult(BaseModel):
    decision: Decision
    reason: str
    memory_id: str | None = None
    supersedes: str | None = None


class RevalidateInput(BaseModel):
    """RevalidateWorkflow's input: which memory, why (trigger code), and how long it may keep trying."""

    tenant_id: str
    memory_id: str
    trigger: str = "read_time"
    max_attempts: int = 1
    """Checks before giving up while the source stays unavailable (a background revalidation retries)."""
    retry_seconds: float = 1.0
    """First wait between attempts; doubles each time (durable timers, skippable in tests)."""


class ReadCheck(BaseModel):
    """A read-time revalidation's verdict on one hit, for the API: how to label it, or why it is held back."""

    memory_id: str
    freshness: Freshness
    version: int | None = None
    """The row version the verdict is about: a row that moved on since (a change event) is not served on it."""


class RetrieveInput(BaseModel):
    """RetrieveWorkflow's input. The API passes the query by claim check (`query_ref`), so what a
    person asked never enters history; `query` is for callers without a store."""

    query: str = ""
    query_ref: str | None = None
    k: int
    read_filter: ReadFilter
    consequence: Consequence = Consequence.LOW
    actor: str
    subject_ref: str | None = None
    """A subject handle holding the real `read_filter`; the one here then has no clauses (reads nothing
    if the handle is gone). None when the read filter here is the real one (callers without a store)."""


class RetrieveResult(BaseModel):
    """Ids and scores only: the API loads content after re-checking eligibility (claim check)."""

    hits: list[Hit]
    withheld: list[dict[str, Any]] = Field(default_factory=list)
    checks: list[ReadCheck] = Field(default_factory=list)
    """Read-time revalidation verdicts (verified / unverified) for hits checked at their source."""
    background: list[RevalidateInput] = Field(default_factory=list)
    """Checks that missed the read's deadline (or found the source down): RetrieveWorkflow starts each as a
    RevalidateWorkflow that outlives the read."""


class Screening(BaseModel):
    """What the detectors found in a candidate, as codes only: the gate decides on this, never on text.

    Produced by `memwarden.detect` inside an activity; safe for workflow history because it holds
    detector and entity names, never the matched text.
    """

    model_config = ConfigDict(extra="forbid")

    secrets: list[str] = Field(default_factory=list)
    pii: list[str] = Field(default_factory=list)
    instruction_like: bool = False
    instruction_signals: list[str] = Field(default_factory=list)
    behaviour_changing: bool = False
    failed_tool_output: bool = False
    directive: bool = False
    """Some free text addresses the agent: a direction, a rule or policy for it, a claim of authority or
    permission, a role prefix, a command to remember. A source that may not instruct the agent is refused."""
    task_scoped: bool = False
    """Every direction in the candidate is scoped to the task at hand: it is kept as a `task` memory."""
    pii_fields: list[str] = Field(default_factory=list)
    """Free-text fields other than the content that hold PII (only content can be redacted)."""
    deadline_exceeded: bool = False
    """A detector ran past the screening's time budget: nothing here can be relied on (fail closed)."""


class CommitInput(BaseModel):
    """Commit a gated candidate (or stage it, or promote a confirmed one) with the gate's adjustments."""

    candidate: RememberInput
    importance: float
    reason: str = "accepted"
    redact: list[str] = Field(default_factory=list)
    """PII categories replaced by placeholders before the content is stored."""
    ttl_seconds: int | None = None
    """Lifetime from the type's retention policy and the caller's ttl (None: no expiry by age)."""
    untrusted: bool = False
    """Stored flagged untrusted (tool observations): lower confidence, labelled with its source."""


class SettleAction(StrEnum):
    CONFIRM = "confirm"
    DECLINE = "decline"
    TIMEOUT = "timeout"


class SettleRequest(BaseModel):
    """A confirm or decline of a pending write, from the owner or the store's moderator."""

    action: SettleAction
    actor: str


class PendingWrite(BaseModel):
    """PendingWriteWorkflow's input: the staged write and how long it may wait."""

    commit: CommitInput
    window_seconds: int
    stage_reason: str


# -- Forget: what crosses into ForgetWorkflow's history (ids, names, counts; never a person's id) --


class ForgetInput(BaseModel):
    """ForgetWorkflow's input: the deletion (already tombstoned by the API) and nothing about its subject."""

    deletion_id: str
    tenant_id: str


class SinkTask(BaseModel):
    """One purge or verification of one sink for one deletion; `attempt` counts the workflow's rounds."""

    deletion_id: str
    tenant_id: str
    sink: str
    attempt: int = 1


class SinkEvidence(BaseModel):
    """A sink's read-back check: how it looked, what it found. Counts and ids only."""

    sink: str
    method: str
    absent: bool
    checked: int
    remaining: int
    detail: dict[str, Any] = Field(default_factory=dict)


class ForgetPlan(BaseModel):
    """The sinks this deletion fans out to, as the worker's configuration names them."""

    sinks: list[str]
    members: int


class ForgetResult(BaseModel):
    deletion_id: str
    receipt_hash: str
    sinks: list[SinkEvidence]


class SummarizeInput(BaseModel):
    """SummarizeWorkflow's input: whose episodic memories to consolidate, by handle, never by person id.

    `subject_ref` names a claim check (`memwarden.stores.summaries.park_summary_request`) holding the
    owner id and the requesting actor; erasing the owner deletes it, so history keeps nothing that
    identifies them.
    """

    tenant_id: str
    subject_ref: str


class SummarizeResult(BaseModel):
    summary_id: str | None
    derived_from: int


class RetentionPlan(BaseModel):
    """The deletions one retention sweep recorded (ids only), one per tenant with expired memories."""

    deletions: list[ForgetInput] = Field(default_factory=list)


# -- Revalidate: what crosses into RevalidateWorkflow's and InvalidateWorkflow's history (ids, codes) --


class RevalidationOutcome(StrEnum):
    """What a system of record said about one memory, as the status machine applies it."""

    UNCHANGED = "unchanged"
    """Still valid (304, or 200 with the same content): `last_confirmed_at` moves, a stale one is active again."""
    CHANGED = "changed"
    """The source holds another value: it supersedes the memory (source version recorded), never both live."""
    GONE = "gone"
    """404/410: the record no longer exists there; the memory is `invalidated`."""
    UNAVAILABLE = "unavailable"
    """No usable answer in time: nothing changes, the attempt is recorded."""
    DISPUTED = "disputed"
    """The source disagrees but loses the conflict rules (not the designated system of record, and the
    memory's provenance is more trusted): the memory is kept as it is, not confirmed."""
    SKIPPED = "skipped"
    """Nothing to check: no source_ref, or the memory is no longer live (superseded, forgotten, ...)."""


class RevalidateResult(BaseModel):
    """Ids and codes only: the new value's id when the source changed it, never the value."""

    outcome: RevalidationOutcome
    memory_id: str
    reason: str
    new_memory_id: str | None = None
    attempts: int = 1


class SourceChange(StrEnum):
    CHANGED = "changed"
    DELETED = "deleted"


class SourceEvent(BaseModel):
    """One change event (CloudEvents id, kind, announced version), as InvalidateWorkflow's signal carries it."""

    event_id: str
    change: SourceChange
    version: str | None = None
    memory_ids: list[str] = Field(default_factory=list)
    """The dependents the API marked (stale or invalidated) before it answered 202."""


class InvalidateInput(BaseModel):
    """InvalidateWorkflow's input: one source record of one tenant (the workflow id is derived from it)."""

    tenant_id: str
    system: str
    key_hash: str
    """sha256 of the record key: the key may name a person (an account, a booking), so history holds its
    hash; the dependents come by memory id in each signal, found by the API from the key it was given."""


class InvalidateResult(BaseModel):
    events: int
    stale: int
    invalidated: int
    revalidated: int


class RevertInput(BaseModel):
    """RevertWorkflow's input: undo one supersession (`revert`) or release one quarantined write (`release`).

    Ids and the actor's audit pseudonym only; the value brought back is copied inside the store."""

    tenant_id: str
    memory_id: str
    actor: str
    action: str = "revert"


class RevertResult(BaseModel):
    """The new live version (None when nothing went live), what it replaced, and what it restored."""

    memory_id: str | None
    reverted: str
    restored_from: str | None
    outcome: str


class RollbackInput(BaseModel):
    """RollbackWorkflow's input: the rollback (already quarantined by the API) and its tenant."""

    rollback_id: str
    tenant_id: str


class RollbackTask(BaseModel):
    """One sink's apply or check for one rollback; `attempt` counts the workflow's rounds."""

    rollback_id: str
    tenant_id: str
    sink: str
    attempt: int = 1


class RollbackPlan(BaseModel):
    """What the restore step did and the sinks to fan out to (this worker's configuration)."""

    sinks: list[str]
    members: int
    restored: int


class RollbackResult(BaseModel):
    rollback_id: str
    receipt_hash: str
    sinks: list[SinkEvidence]


class MessageRole(StrEnum):
    """Who spoke a turn of a conversation handed to `POST /v1/conversations`."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"


class ConversationInput(BaseModel):
    """ConversationWorkflow's input: where the conversation is parked and whom it is for, no text.

    `conversation_ref` names the claim check holding the messages (JSON); `subject_ref` the handle holding
    the owner's id and the writer (as for Remember). `namespace_key` is a UUID fixed by (tenant, caller,
    session): each candidate's memory id is derived from it, the turn and the candidate's index, so the same
    turn sent again names the same memories. `session_key` is a keyed hash of the session id (the session id
    itself is the caller's text and stays in the claim check)."""

    conversation_ref: str
    namespace_key: str
    session_key: str
    message_count: int
    tenant_id: str
    scope: Scope
    agent_id: str | None = None
    store: str | None = None
    actor: str
    subject_ref: str
    concurrency: int = Field(default=1, ge=1, le=16)


class ExtractedCandidate(BaseModel):
    """One candidate the extractor proposed, sealed for history: the RememberWorkflow input (its content
    parked under `candidate.candidate_ref`) and the message it came from, by index and turn id."""

    candidate: RememberInput
    message_index: int
    turn_id: str | None = None
    extractor: str
    kind: str
    """What the extractor saw (`preference`, `fact`, `plan`, `correction`, `task_guidance`, `episode`,
    `repeated_guidance`): a code, never text."""
    known: RememberResult | None = None
    """Set when an earlier run already decided this candidate (its memory row exists): no child runs."""


class Extraction(BaseModel):
    """What `extract_conversation` returns: every sealed candidate, in message order."""

    candidates: list[ExtractedCandidate]
    extractor: str


class CandidateOutcome(BaseModel):
    """Per candidate of a conversation: the gate's answer and the message it came from."""

    message_index: int
    turn_id: str | None = None
    kind: str
    type: MemoryType
    decision: Decision
    reason: str
    memory_id: str | None = None
    supersedes: str | None = None
    workflow_id: str | None = None


class ConsolidateInput(BaseModel):
    """`consolidate_session`'s input: the session's episodic memories written by this conversation."""

    tenant_id: str
    subject_ref: str
    conversation_ref: str
    session_key: str
    actor: str
    memory_ids: list[str]


class ConsolidateResult(BaseModel):
    summary_id: str | None = None
    derived_from: int = 0


class ConversationResult(BaseModel):
    """ConversationWorkflow's answer: one outcome per candidate, in message order, and the session summary."""

    outcomes: list[CandidateOutcome]
    extractor: str
    summary_id: str | None = None
    summary_derived_from: int = 0
