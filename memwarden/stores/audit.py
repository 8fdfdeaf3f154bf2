"""Audit events and their hash chain: tamper-evident, and free of memory content by construction.

Every decision memwarden makes (writes, rejections, reads, status changes, deletions) is one
event. Events form a single global chain in insertion order: each event's `hash` is
sha256(prev_hash + canonical JSON of the event), so changing, removing or reordering any stored
event breaks verification from that point on. The canonical form is defined here, once, and never
depends on a library's formatting, so hashes stay verifiable across upgrades.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memwarden.forget import subject_hash
from memwarden.records import POLICY_VERSION

GENESIS_HASH = "0" * 64
"""The `prev_hash` of the first event in the chain."""


class Operation(StrEnum):
    """The operations audit events name (the field stays a string, so new ones need no migration)."""

    CREATE = "create"
    READ = "read"
    UPDATE = "update"
    DELETE = "delete"
    DENY = "deny"
    REVALIDATE = "revalidate"
    CONFIRM = "confirm"
    EXPIRE = "expire"


FORBIDDEN_DETAIL_KEYS = frozenset({"content", "query"})
"""Keys that would carry what a user said; refused at any depth so content cannot slip into audit."""


class AuditEventIn(BaseModel):
    """What a caller records; the store assigns `seq`, `prev_hash` and `hash` when it appends."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(default_factory=lambda: str(uuid.uuid4()), min_length=1, max_length=64)
    """Idempotency: appending an id that is already in the chain is a no-op (retried activities)."""
    at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    tenant_id: str = Field(min_length=1)
    actor: str = Field(min_length=1)
    operation: str = Field(min_length=1)
    memory_id: str | None = None
    namespace: str | None = None
    reason: str | None = None
    policy_version: str = POLICY_VERSION
    workflow_id: str | None = None
    deletion_id: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)
    """Ids, codes, counts and hashes only; never content (see FORBIDDEN_DETAIL_KEYS)."""
    hash_before: str | None = Field(default=None, max_length=64)
    """content_hash of the memory before the operation, when it changed one."""
    hash_after: str | None = Field(default=None, max_length=64)
    """content_hash of the memory after the operation."""

    @field_validator("at")
    @classmethod
    def _utc(cls, value: datetime) -> datetime:
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError("audit time must be timezone-aware")
        return value.astimezone(UTC)

    @field_validator("details")
    @classmethod
    def _no_content(cls, value: dict[str, Any]) -> dict[str, Any]:
        _check_detail_keys(value)
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError("audit details must be plain JSON (no NaN, no objects)") from exc
        return value


PSEUDONYM_MARK = "~"
"""Marks a keyed hash where an identifier was: `user:~<64 hex>`."""
NON_PERSON_ROLES = frozenset({"system", "agent"})
"""Actors that are services, not people (the service's own components, systems of record, agents):
their ids stay readable. Every other actor (user, operator, privacy officer) is a person."""


def is_pseudonym(value: str) -> bool:
    """True for `~` + a 64-hex keyed hash (so pseudonymizing twice changes nothing)."""
    body = value[len(PSEUDONYM_MARK) :]
    return value.startswith(PSEUDONYM_MARK) and len(body) == 64 and all(c in "0123456789abcdef" for c in body)


class Pseudonymizer:
    """Person identifiers in audit events as keyed hashes, the receipts' scheme (`subject_hash`).

    Why: the audit log outlives every erasure (its rows are chained, so they are never edited), so a
    person's id must not be readable in it. With the key (`memwarden.forget.subject_key` of the
    service's secret) an auditor links an event to a receipt: a namespace's owner hashes to the
    receipt's `subject_hash`, an actor to its `requester_hash`. Without the key nothing links to a person.
    """

    def __init__(self, key: bytes) -> None:
        self._key = key

    def subject(self, tenant_id: str, value: str) -> str:
        """One identifier: `~` + HMAC-SHA256(tenant, value) (a receipt's subject_hash, marked)."""
        return value if is_pseudonym(value) else PSEUDONYM_MARK + subject_hash(self._key, tenant_id, value)

    def actor(self, tenant_id: str, actor: str) -> str:
        """`role:sub` -> `role:~hash(role:sub)` for people; services stay as they are."""
        role, sep, sub = actor.partition(":")
        if not sep:
            return self.subject(tenant_id, actor)
        if role in NON_PERSON_ROLES or is_pseudonym(sub):
            return actor
        return f"{role}:{PSEUDONYM_MARK}{subject_hash(self._key, tenant_id, actor)}"

    def namespace(self, tenant_id: str, namespace: str | None) -> str | None:
        """`user:O` / `agent:A:O` -> the owner O hashed; `shared:S` (a store's name) stays; else all hashed.

        The inverse reading of `memwarden.records.namespace_label`, the one way a namespace is named."""
        if namespace is None:
            return None
        scope, sep, rest = namespace.partition(":")
        if sep and scope == "shared":
            return namespace
        if sep and scope == "user":
            return f"user:{self.subject(tenant_id, rest)}"
        if sep and scope == "agent":
            agent, sep2, owner = rest.partition(":")
            if sep2:
                return f"agent:{agent}:{self.subject(tenant_id, owner)}"
        return self.subject(tenant_id, namespace)

    def event(self, event: AuditEventIn) -> AuditEventIn:
        """The event as it is stored: actor and namespace pseudonymous, everything else unchanged."""
        actor = self.actor(event.tenant_id, event.actor)
        namespace = self.namespace(event.tenant_id, event.namespace)
        if actor == event.actor and namespace == event.namespace:
            return event
        return event.model_copy(update={"actor": actor, "namespace": namespace})


class AuditEvent(AuditEventIn):
    """An event as stored: with its position in the chain and the hashes that link it."""

    seq: int
    prev_hash: str
    hash: str


def _check_detail_keys(value: object) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if str(key).lower() in FORBIDDEN_DETAIL_KEYS:
                raise ValueError(f"audit details may not carry {key!r}")
            _check_detail_keys(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _check_detail_keys(item)


def canonical_json(event: AuditEventIn) -> str:
    """The exact text that is hashed: sorted keys, no spaces, UTC time with microseconds."""
    body = {
        "id": event.id,
        "at": event.at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "tenant_id": event.tenant_id,
        "actor": event.actor,
        "operation": event.operation,
        "memory_id": event.memory_id,
        "namespace": event.namespace,
        "reason": event.reason,
        "policy_version": event.policy_version,
        "workflow_id": event.workflow_id,
        "deletion_id": event.deletion_id,
        "details": event.details,
        "hash_before": event.hash_before,
        "hash_after": event.hash_after,
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def chain_hash(prev_hash: str, event: AuditEventIn) -> str:
    """sha256(prev_hash + canonical JSON): the link that makes the log tamper-evident."""
    return hashlib.sha256((prev_hash + canonical_json(event)).encode("utf-8")).hexdigest()


class AuditVerification(BaseModel):
    """What walking the chain found: all good, or the first broken link and why."""

    ok: bool
    events: int
    """Events verified before stopping (all of them when ok)."""
    checkpoints: int
    """Signed checkpoints verified before stopping."""
    broken_seq: int | None = None
    """seq of the first event (or checkpoint) that fails; None when ok."""
    reason: str | None = None
    """prev_hash_mismatch | hash_mismatch | checkpoint_hash_mismatch | checkpoint_count_mismatch |
    checkpoint_sequence_broken | checkpoint_signature_invalid | checkpoint_unknown_key |
    checkpoint_event_missing | events_missing_after_checkpoint | checkpoint_missing |
    published_head_mismatch | published_head_signature_invalid | events_missing_before_published_head"""
    last_good_checkpoint: int | None = None
    """seq of the last checkpoint that verified: history up to it is as signed."""
    head_seq: int | None = None
    head_hash: str | None = None
    last_published_seq: int | None = None
    """seq of the newest head published outside the database (memwarden.audit_heads) that verified."""
    events_past_published: int | None = None
    """Events after that head: the tail no published head vouches for yet (None without published heads)."""


def read_event(
    *,
    tenant_id: str,
    actor: str,
    workflow_id: str,
    returned: list[str],
    withheld: list[dict[str, Any]],
    consequence: str | None = None,
    agent: str | None = None,
    session: str | None = None,
) -> AuditEventIn:
    """The audit event for one search: which memories were returned and withheld, by id only.

    `agent` (an agent token's `agent` claim, a service's id) and `session` (the conversation the request
    names) let an incident review tell which agents and sessions a memory reached (`stores.reads`).

    Its id derives from the workflow id, so recording it twice (a retried request) is a no-op.
    """
    return AuditEventIn(
        id=f"read:{workflow_id}"[:64],
        tenant_id=tenant_id,
        actor=actor,
        operation=Operation.READ,
        reason="search",
        workflow_id=workflow_id,
        details={
            "returned": list(returned),
            "withheld": [{"memory_id": str(w.get("memory_id")), "reason": str(w.get("reason"))} for w in withheld],
            "consequence": consequence,
            **({"agent": agent} if agent else {}),
            **({"session": session} if session else {}),
        },
    )
