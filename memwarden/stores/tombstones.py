"""What a forgotten memory's row keeps once its content is purged: ids, statuses, times and pseudonyms.

Why: the row stays (a restore, a lagging replica or a retried commit must never bring the memory
back), but everything in it that says *what* it was or *whose* it was goes with the content:
- `slot` ("medical.condition") and `source_ref` (a record key such as a ticket or a patient number)
  describe the content; both are cleared;
- provenance keeps only `writer` (a role and id, as a pseudonym when it is a person's): the session,
  turn and span ids may be a conversation's names, and the speaker is a person's name;
- `owner_id` becomes the owner's keyed pseudonym (`~` + HMAC-SHA256 under the pseudonym key, the
  audit log's and the receipts' scheme), so the owner can still be matched with the key (their own
  GET of the tombstone, an auditor linking a receipt) but no byte on disk names them.

A deletion's `requester` is stored the same way (`Pseudonymizer.actor`): a receipt's
`requester_hash` is the hash inside it, the value it always had.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from memwarden.forget import subject_hash
from memwarden.stores.audit import PSEUDONYM_MARK, Pseudonymizer, is_pseudonym
from memwarden.stores.sql_models import memories

KEPT_PROVENANCE = ("writer",)
"""The provenance a tombstone keeps: who wrote it (pseudonymous for people); everything else goes."""

_PROVENANCE_DROPPED = ("session", "turn", "span", "speaker")


def unscrubbed(pseudonyms: Pseudonymizer | None) -> sa.ColumnElement[bool]:
    """A purged row that still holds more than a tombstone may (what the store sink's read-back counts)."""
    m = memories.c
    left: list[sa.ColumnElement[bool]] = [m.slot.is_not(None), m.source_ref.is_not(None)]
    left += [m.provenance[k].as_string().is_not(None) for k in _PROVENANCE_DROPPED]
    if pseudonyms is not None:
        left.append(sa.not_(m.owner_id.startswith(PSEUDONYM_MARK)))
    return sa.or_(*left)


def _provenance(provenance: dict[str, Any] | None, tenant_id: str, pseudonyms: Pseudonymizer | None) -> dict[str, Any]:
    kept = {k: v for k, v in (provenance or {}).items() if k in KEPT_PROVENANCE and v is not None}
    if pseudonyms is not None and isinstance(kept.get("writer"), str):
        kept["writer"] = pseudonyms.actor(tenant_id, kept["writer"])
    return kept


async def scrub(conn: AsyncConnection, tenant_id: str, ids: list[str], pseudonyms: Pseudonymizer | None) -> int:
    """Reduce these rows to tombstones (see the module doc), in the caller's transaction; rows changed.

    Idempotent: a row already scrubbed matches nothing. Rows sharing an owner and a writer are
    updated together, so a subject's 10k memories cost a handful of statements, not 10k.
    """
    m = memories.c
    rows = (
        await conn.execute(
            sa.select(m.id, m.owner_id, m.provenance).where(
                m.tenant_id == tenant_id, m.id.in_(ids), unscrubbed(pseudonyms)
            )
        )
    ).all()
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    provenance_of: dict[tuple[str, str], dict[str, Any]] = {}
    for memory_id, owner_id, provenance in rows:
        owner = pseudonyms.subject(tenant_id, owner_id) if pseudonyms is not None else owner_id
        kept = _provenance(provenance, tenant_id, pseudonyms)
        key = (owner, repr(sorted(kept.items())))
        groups[key].append(memory_id)
        provenance_of[key] = kept
    for key, members in groups.items():
        await conn.execute(
            sa.update(memories)
            .where(m.tenant_id == tenant_id, m.id.in_(members))
            .values(owner_id=key[0], slot=None, source_ref=None, provenance=provenance_of[key])
        )
    return len(rows)


def stored_requester(pseudonyms: Pseudonymizer | None, tenant_id: str, actor: str) -> str:
    """How a deletion records who asked: `role:~hash` for a person, a service's id as it is."""
    return pseudonyms.actor(tenant_id, actor) if pseudonyms is not None else actor


def requester_hash(key: bytes, tenant_id: str, requester: str) -> str:
    """A receipt's `requester_hash` from the stored requester: the hash a pseudonym already holds, or the
    keyed hash of a service's (or an older row's) plain `role:id`: the same value either way."""
    _role, _sep, sub = requester.partition(":")
    if is_pseudonym(sub):
        return sub[len(PSEUDONYM_MARK) :]
    return subject_hash(key, tenant_id, requester)


def owner_hash(key: bytes, tenant_id: str, owner: str) -> str:
    """The subject hash of a row's owner, whether it holds the id or (a tombstone) its pseudonym."""
    return owner[len(PSEUDONYM_MARK) :] if is_pseudonym(owner) else subject_hash(key, tenant_id, owner)


def is_requester(pseudonyms: Pseudonymizer, tenant_id: str, requester: str, actor: str) -> bool:
    """Whether `actor` (from the token) asked for the deletion whose stored requester is `requester`."""
    return requester in (actor, pseudonyms.actor(tenant_id, actor))


def owned_by(pseudonyms: Pseudonymizer, tenant_id: str, stored_owner: str, owner_id: str) -> bool:
    """Whether a row's owner (an id, or a tombstone's pseudonym) is `owner_id`."""
    return stored_owner == owner_id or (
        is_pseudonym(stored_owner) and stored_owner == pseudonyms.subject(tenant_id, owner_id)
    )
