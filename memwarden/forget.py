"""What a deletion asks for (selectors), how its subject is named (a keyed hash), and its receipt's hash.

Pure: no I/O. The API validates a selector here, the store resolves it to memory ids, and the
receipt that proves the erasure is hashed here, so every part agrees on one canonical form.

A receipt must never hold the raw id of a person: selectors that name a person (an owner, a slot's
owner, a source record's key) are stored and shown in their *redacted* form, where that value is
replaced by `subject_hash`, an HMAC-SHA256 under a key only the service holds. The same person
always hashes the same within a tenant, so an auditor can match receipts to a request without
the receipt revealing who it was.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from memwarden.keys import Purpose, derive_key

_ID = Field(min_length=1, max_length=256)
_NAME = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")

DELETION_NS = uuid.UUID("2d0c6e6b-8f43-4d0b-9a57-51f7d1b0e4a3")


class _Selector(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MemorySelector(_Selector):
    """One memory and every version of its slot chain (what it superseded and what superseded it)."""

    kind: Literal["memory"] = "memory"
    memory_id: str = _ID


class SlotSelector(_Selector):
    """Every version of one slot in one owner's namespace."""

    kind: Literal["slot"] = "slot"
    owner_id: str = _ID
    slot: str = _NAME
    scope: Literal["user", "agent", "shared"] | None = None
    agent_id: str | None = Field(default=None, max_length=256)
    store: str | None = Field(default=None, max_length=128)


class OwnerSelector(_Selector):
    """Data-subject erasure: everything held about one person in the tenant (any scope)."""

    kind: Literal["owner"] = "owner"
    owner_id: str = _ID


class AgentSelector(_Selector):
    """One agent's private store, optionally only what it keeps about one person."""

    kind: Literal["agent"] = "agent"
    agent_id: str = _ID
    owner_id: str | None = Field(default=None, max_length=256)


class SourceSelector(_Selector):
    """Poison or incident clean-up: every memory citing one source record; the record is quarantined."""

    kind: Literal["source"] = "source"
    system: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    key: str = Field(min_length=1, max_length=256)


class TenantSelector(_Selector):
    """Offboarding: the whole tenant (privacy role only)."""

    kind: Literal["tenant"] = "tenant"


class ExpiredSelector(_Selector):
    """Retention: memories past `expires_at` (the service's own sweep; they end `expired`, not `purged`)."""

    kind: Literal["expired"] = "expired"


class QuarantinedSelector(_Selector):
    """What one rollback quarantined and is still quarantined (a moderator forgets it; no role may send it
    to `POST /v1/forget`, the route `POST /v1/rollbacks/{id}/forget` builds it)."""

    kind: Literal["quarantined"] = "quarantined"
    rollback_id: str = _ID
    stores: list[str] | None = None
    """Only members in these shared stores (a moderator's, for a rollback that spans more than theirs)."""


Selector = Annotated[
    MemorySelector
    | SlotSelector
    | OwnerSelector
    | AgentSelector
    | SourceSelector
    | TenantSelector
    | ExpiredSelector
    | QuarantinedSelector,
    Field(discriminator="kind"),
]


class ForgetRequest(BaseModel):
    """`POST /v1/forget`'s body."""

    model_config = ConfigDict(extra="forbid")

    selector: Selector
    reason: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9_.-]+$")


def subject_key(secret: str) -> bytes:
    """The HMAC key for subject hashes (receipts, audit pseudonyms): derived from the service's secret for
    that purpose alone (memwarden.keys), never stored."""
    return derive_key(secret, Purpose.PSEUDONYMS)


def subject_hash(key: bytes, tenant_id: str, subject: str) -> str:
    """HMAC-SHA256 of (tenant, subject): stable per person and tenant, meaningless without the key."""
    return hmac.new(key, f"{tenant_id}\x00{subject}".encode(), hashlib.sha256).hexdigest()


SUBJECT_REF_PREFIX = "subject-"
"""Claim checks that hold a person's id for a workflow's sake: `subject-<subject_hash>-<nonce>`."""


def subject_ref_prefix(subject_hash_: str) -> str:
    """Every claim check parked for one subject: what erasing that subject deletes."""
    return f"{SUBJECT_REF_PREFIX}{subject_hash_}-"


def subject_of(selector: _Selector) -> str | None:
    """The person (or record key) a selector names, if it names one."""
    if isinstance(selector, OwnerSelector | SlotSelector):
        return selector.owner_id
    if isinstance(selector, AgentSelector):
        return selector.owner_id
    if isinstance(selector, SourceSelector):
        return f"{selector.system}\x00{selector.key}"
    return None


def redacted(selector: _Selector, key: bytes, tenant_id: str) -> dict[str, Any]:
    """The selector as stored and shown: a person's id (or a record key) replaced by its keyed hash."""
    body = selector.model_dump(mode="json", exclude_none=True)
    subject = subject_of(selector)
    if subject is not None:
        body.pop("owner_id", None)
        body.pop("key", None)
        body["subject_hash"] = subject_hash(key, tenant_id, subject)
    return body


def canonical(value: object) -> str:
    """Sorted keys, no spaces: the one text that is hashed."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def selector_key(tenant_id: str, redacted_selector: dict[str, Any]) -> str:
    """Identifies "the same request": the tenant and the redacted selector."""
    return hashlib.sha256(canonical({"t": tenant_id, "s": redacted_selector}).encode()).hexdigest()


def deletion_id(selector_key_: str, member_ids: list[str]) -> str:
    """Deterministic: the same selector over the same memories is the same deletion (racing requests meet)."""
    members = hashlib.sha256("\n".join(sorted(member_ids)).encode()).hexdigest()
    return str(uuid.uuid5(DELETION_NS, f"{selector_key_}:{members}"))


def receipt_hash(receipt: dict[str, Any]) -> str:
    """sha256 of the receipt's canonical JSON; the audit event carrying it chains it into the log."""
    return hashlib.sha256(canonical(receipt).encode()).hexdigest()
