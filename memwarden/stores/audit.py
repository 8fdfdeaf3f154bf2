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
    checkpoint_event_missing | events_missing_after_checkpoint | checkpoint_missing"""
    last_good_checkpoint: int | None = None
    """seq of the last checkpoint that verified: history up to it is as signed."""
    head_seq: int | None = None
    head_hash: str | None = None


def read_event(
    *,
    tenant_id: str,
    actor: str,
    workflow_id: str,
    returned: list[str],
    withheld: list[dict[str, Any]],
    consequence: str | None = None,
) -> AuditEventIn:
    """The audit event for one search: which memories were returned and withheld, by id only.

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
        },
    )
