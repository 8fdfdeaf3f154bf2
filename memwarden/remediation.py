"""What a rollback asks for (selectors), how it is named, and its receipt: pure, no I/O.

A rollback answers "this writer (or this source record, or these ids) poisoned memory": every matching
write is quarantined at once (excluded from every read before the API answers), the value each one
superseded is brought back as a new version, summaries drawing on them are re-derived, and a receipt
like a deletion's is chained into the audit log. The selector is stored and shown redacted (a source
record's key as a keyed hash, as `memwarden.forget.redacted` does); a writer is a principal label
(`role:sub`, exactly as `provenance.writer` is recorded), not a person's id, so it stays readable.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from memwarden.forget import canonical, subject_hash

ROLLBACK_NS = uuid.UUID("8a3f0c1e-5b7d-4e29-9c64-1f2e3d4c5b6a")
RESTORE_NS = uuid.UUID("c41d2e7a-9b38-4f05-8e16-7a5b4c3d2e1f")
MAX_LISTED_IDS = 500
MAX_WINDOW_DAYS = 366


class _Selector(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class WriterSelector(_Selector):
    """Every write one principal made in a time window: `writer` is `provenance.writer` (`agent:SUB`, ...)."""

    kind: Literal["writer"] = "writer"
    writer: str = Field(min_length=3, max_length=256, pattern=r"^(user|agent|system):[^\s]+$")
    since: AwareDatetime
    until: AwareDatetime

    @model_validator(mode="after")
    def _window(self) -> WriterSelector:
        if self.until <= self.since:
            raise ValueError("until must be after since")
        if (self.until - self.since).days > MAX_WINDOW_DAYS:
            raise ValueError(f"the window is at most {MAX_WINDOW_DAYS} days")
        return self


class SourceRecordSelector(_Selector):
    """Every memory citing one source record (a poisoned record)."""

    kind: Literal["source"] = "source"
    system: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_.-]+$")
    key: str = Field(min_length=1, max_length=256)


class MemoriesSelector(_Selector):
    """These memories, by id."""

    kind: Literal["memories"] = "memories"
    memory_ids: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(
        min_length=1, max_length=MAX_LISTED_IDS
    )


RollbackSelector = Annotated[WriterSelector | SourceRecordSelector | MemoriesSelector, Field(discriminator="kind")]


class RollbackRequest(BaseModel):
    """`POST /v1/rollbacks`'s body. `store` confines it to one shared store (required of a moderator)."""

    model_config = ConfigDict(extra="forbid")

    selector: RollbackSelector
    reason: str = Field(min_length=1, max_length=64, pattern=r"^[a-z0-9_.-]+$")
    store: str | None = Field(default=None, min_length=1, max_length=128)


def redacted_selector(selector: _Selector, key: bytes, tenant_id: str) -> dict[str, Any]:
    """As stored and shown: a source record's key becomes its keyed hash; ids and a writer label stay."""
    body = selector.model_dump(mode="json")
    if isinstance(selector, SourceRecordSelector):
        body.pop("key")
        body["subject_hash"] = subject_hash(key, tenant_id, f"{selector.system}\x00{selector.key}")
    if isinstance(selector, MemoriesSelector):
        body["memory_ids"] = sorted(set(selector.memory_ids))
    return body


def rollback_id(tenant_id: str, redacted: dict[str, Any], store: str | None, member_ids: list[str]) -> str:
    """Deterministic: the same selector over the same writes is the same rollback (a retried request meets it)."""
    members = hashlib.sha256("\n".join(sorted(member_ids)).encode()).hexdigest()
    return str(uuid.uuid5(ROLLBACK_NS, canonical({"t": tenant_id, "s": redacted, "store": store, "m": members})))


def restored_id(origin: str, memory_id: str) -> str:
    """The id of the version that brings back `memory_id`'s value on behalf of `origin` (a rollback, a
    revert, a release): fixed, so a retried activity writes it once."""
    return str(uuid.uuid5(RESTORE_NS, f"{origin}:{memory_id}"))


def build_rollback_receipt(
    row: dict[str, Any], sinks: list[dict[str, Any]], *, requester_hash: str, completed_at: datetime
) -> dict[str, Any]:
    """The document whose canonical JSON hashes to the rollback's `receipt_hash` (ids, counts, evidence)."""
    return {
        "format": "memwarden.rollback-receipt/1",
        "rollback_id": row["id"],
        "tenant_id": row["tenant_id"],
        "requester_hash": requester_hash,
        "reason": row["reason"],
        "store": row["store"],
        "selector": row["selector"],
        "counts": row["counts"] or {},
        "sinks": [
            {
                "name": s["name"],
                "method": s["method"],
                "status": s["status"],
                "applied": s["applied"],
                "attempts": s["attempts"],
                "verified_at": s["verified_at"].isoformat() if s["verified_at"] else None,
                "evidence": s["evidence"],
            }
            for s in sorted(sinks, key=lambda s: s["name"])
        ],
        "created_at": row["created_at"].isoformat(),
        "completed_at": completed_at.isoformat(),
    }
