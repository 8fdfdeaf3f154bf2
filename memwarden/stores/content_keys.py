"""Content hashes in the audit log, keyed per subject, with a key that erasing the subject destroys.

Why: the audit log is permanent (its rows are chained, so never edited), and a bare SHA-256 of a short
text is no secret: "the door code is NNNN" is recovered by hashing all ten thousand candidates. So an
event's `hash_before`, `hash_after` and `details.content_hash` are stored as
HMAC-SHA256(k_subject, sha256(content)), where k_subject is 32 random bytes kept in `subject_keys` for
the person the memory belongs to (its owner), created on their first event. Erasing that person
(Forget's `owner` selector, or the whole tenant) deletes the key in the tombstone's transaction: the
old hashes then match nothing, and nothing can be tried against them. While the key exists, an
auditor holding the database can still check an event against a memory's content
(`ContentKeys.keyed`). Rejected writes carry no content hash at all (the caller leaves it out): a
rejected secret is exactly what must not be guessable.

A store without a pseudonymizer (no service secret to name subjects by) keeps no content hashes in
audit events at all; nothing here ever stores an unkeyed one.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from memwarden.stores.audit import AuditEventIn, Pseudonymizer
from memwarden.stores.sql_models import UTCDateTime, memories, metadata


class _Store(Protocol):
    """What this needs of the SqlStore (which holds one of these): its engine and its dialect's INSERT."""

    @property
    def engine(self) -> AsyncEngine: ...

    def insert(self, table: sa.Table) -> sqlite.Insert | postgresql.Insert: ...


subject_keys = sa.Table(
    "subject_keys",
    metadata,
    sa.Column("tenant_id", sa.String(), primary_key=True),
    sa.Column("subject_hash", sa.String(64), primary_key=True),
    sa.Column("key", sa.LargeBinary(), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
)
"""One random key per person (by their keyed hash, never their id); deleted when they are erased."""

HASH_FIELDS = ("hash_before", "hash_after")


def keyed_hash(key: bytes, digest: str) -> str:
    """HMAC-SHA256 of a content digest under one subject's key (hex, the width of the digest)."""
    return hmac.new(key, digest.encode("ascii"), hashlib.sha256).hexdigest()


def _has_hashes(event: AuditEventIn) -> bool:
    return any(getattr(event, f) for f in HASH_FIELDS) or "content_hash" in event.details


def _stripped(event: AuditEventIn) -> AuditEventIn:
    details = {k: v for k, v in event.details.items() if k != "content_hash"}
    return event.model_copy(update={"hash_before": None, "hash_after": None, "details": details})


def _namespace_owner(namespace: str | None) -> str | None:
    """The owner a (not yet pseudonymized) namespace label names; None for a shared store's label."""
    if namespace is None:
        return None
    scope, _, rest = namespace.partition(":")
    if scope == "user" and rest:
        return rest
    if scope == "agent":
        _, sep, owner = rest.partition(":")
        return owner if sep and owner else None
    return None


class ContentKeys:
    """Seals the content hashes of audit events before they are chained (called inside the append's transaction)."""

    def __init__(self, store: _Store, pseudonyms: Pseudonymizer | None) -> None:
        self._store = store
        self._pseudonyms = pseudonyms

    def subject_hash(self, tenant_id: str, owner_id: str) -> str:
        assert self._pseudonyms is not None
        return self._pseudonyms.subject(tenant_id, owner_id).removeprefix("~")

    def key(self, conn: Connection, tenant_id: str, subject_hash: str) -> bytes:
        """The subject's key, created on first use (a racing creator's key wins: ON CONFLICT DO NOTHING)."""
        k = subject_keys.c
        where = (k.tenant_id == tenant_id, k.subject_hash == subject_hash)
        found = conn.scalar(sa.select(k.key).where(*where))
        if found is not None:
            return bytes(found)
        row = {
            "tenant_id": tenant_id,
            "subject_hash": subject_hash,
            "key": secrets.token_bytes(32),
            "created_at": datetime.now(UTC),
        }
        conn.execute(self._store.insert(subject_keys).values(**row).on_conflict_do_nothing())
        return bytes(conn.scalar(sa.select(k.key).where(*where)))

    async def keyed(self, tenant_id: str, owner_id: str, digest: str) -> str | None:
        """What an event records for `digest` about `owner_id` now; None once their key is destroyed."""
        if self._pseudonyms is None:
            return None
        k = subject_keys.c
        subject = self.subject_hash(tenant_id, owner_id)
        async with self._store.engine.connect() as conn:
            found = await conn.scalar(sa.select(k.key).where(k.tenant_id == tenant_id, k.subject_hash == subject))
        return keyed_hash(bytes(found), digest) if found is not None else None

    def seal(
        self, conn: Connection, events: Sequence[AuditEventIn], owners: Mapping[str, str] | None = None
    ) -> list[AuditEventIn]:
        """The events with every content hash keyed under its memory owner's key (or dropped, if none can be).

        `owners`: memory id -> owner, for memories the caller holds in this transaction (the row it just
        wrote), so they are not read back."""
        if not any(_has_hashes(e) for e in events):
            return list(events)
        if self._pseudonyms is None:
            return [_stripped(e) if _has_hashes(e) else e for e in events]
        known = owners or {}
        owners_of: dict[tuple[str, str], str] = {
            (e.tenant_id, e.memory_id): known[e.memory_id] for e in events if e.memory_id in known
        }
        unnamed = {(e.tenant_id, e.memory_id) for e in events if _has_hashes(e) and e.memory_id}
        unnamed = {pair for pair in unnamed if pair[1] is not None and pair not in owners_of}
        if unnamed:
            m = memories.c
            for tenant_id in {t for t, _ in unnamed}:
                ids = [i for t, i in unnamed if t == tenant_id]
                rows = conn.execute(sa.select(m.id, m.owner_id).where(m.tenant_id == tenant_id, m.id.in_(ids)))
                owners_of.update({(tenant_id, i): o for i, o in rows})
        keys: dict[tuple[str, str], bytes] = {}
        sealed: list[AuditEventIn] = []
        for event in events:
            if not _has_hashes(event):
                sealed.append(event)
                continue
            owner = owners_of.get((event.tenant_id, event.memory_id or "")) or _namespace_owner(event.namespace)
            if owner is None:
                sealed.append(_stripped(event))
                continue
            subject = (event.tenant_id, self.subject_hash(event.tenant_id, owner))
            if subject not in keys:
                keys[subject] = self.key(conn, *subject)
            sealed.append(_keyed(event, keys[subject]))
        return sealed


def _keyed(event: AuditEventIn, key: bytes) -> AuditEventIn:
    update: dict[str, Any] = {f: keyed_hash(key, getattr(event, f)) for f in HASH_FIELDS if getattr(event, f)}
    digest = event.details.get("content_hash")
    if "content_hash" in event.details:
        details = dict(event.details)
        details["content_hash"] = keyed_hash(key, digest) if isinstance(digest, str) and digest else None
        update["details"] = details
    return event.model_copy(update=update)


async def destroy_subject_key(conn: AsyncConnection, tenant_id: str, subject_hash: str | None) -> None:
    """Erasure: delete one subject's key (or, with `subject_hash` None, every key of the tenant)."""
    k = subject_keys.c
    where = [k.tenant_id == tenant_id]
    if subject_hash is not None:
        where.append(k.subject_hash == subject_hash)
    await conn.execute(sa.delete(subject_keys).where(*where))
