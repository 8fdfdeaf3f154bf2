"""`GET /v1/export`: everything held about one person, every version and status, as one JSON document.

Why a route of its own and not the listing: the listing is paged and shows live memories by default;
an export (the person's right of access and portability) must be complete: every memory whose
`owner_id` is the subject, in any scope (including what agents keep privately about them, and their
writes into shared stores), live and past (superseded, rejected, expired, tombstoned; content is null
once purged), their memory switch, and the deletions that concern them with their receipt hashes.
The audit log is not copied in: it holds ids, codes and hashes only, and privacy officers read it at
`GET /v1/audit`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

import sqlalchemy as sa
from fastapi import APIRouter, Query

from api.problems import Problem
from api.schemas import MemoryOut
from api.state import ApiState, Caller, State
from memwarden.forget import subject_hash
from memwarden.identity import Role
from memwarden.records import MemoryRecord, Namespace, NamespaceClause, ReadFilter, Scope, Status, namespace_label
from memwarden.stores.audit import AuditEventIn
from memwarden.stores.sql_models import deletions

router = APIRouter(prefix="/v1", tags=["export"])

EXPORT_FORMAT = "memwarden.export/1"
_PAGE = 200


def subject_filter(
    tenant: str, owner: str, statuses: tuple[Status, ...] = tuple(Status), *, pseudonym: str | None = None
) -> ReadFilter:
    """Every memory about `owner`, in any scope (user, an agent's, a shared store's), in these statuses;
    with `pseudonym`, their purged tombstones too (whose owner is that pseudonym)."""
    owners = (owner,) if pseudonym is None else (owner, pseudonym)
    return ReadFilter(
        tenant_id=tenant,
        clauses=tuple(NamespaceClause(scope=scope, owner_ids=owners) for scope in Scope),
        statuses=statuses,
    )


async def all_memories(state: ApiState, tenant: str, owner: str) -> list[MemoryRecord]:
    """Every memory about the subject, newest first (pages through the store; no cap: it is an export)."""
    found: list[MemoryRecord] = []
    cursor: str | None = None
    while True:
        rf = subject_filter(tenant, owner, pseudonym=state.pseudonyms.subject(tenant, owner))
        page, cursor = await state.store.list_memories(rf, limit=_PAGE, cursor=cursor)
        found.extend(page)
        if cursor is None:
            return found


async def subject_deletions(state: ApiState, tenant: str, owner: str) -> list[dict[str, Any]]:
    """Deletions the subject asked for, or that erased them (found by the keyed subject hash)."""
    hashed = subject_hash(state.subject_key, tenant, owner)
    actor = f"{Role.USER.value}:{owner}"
    requesters = [actor, state.pseudonyms.actor(tenant, actor)]  # older rows hold the id itself
    d = deletions.c
    query = (
        sa.select(d.id, d.status, d.reason, d.selector, d.created_at, d.completed_at, d.receipt_hash, d.counts)
        .where(d.tenant_id == tenant, sa.or_(d.requester.in_(requesters), d.subject_hash == hashed))
        .order_by(d.created_at.desc(), d.id)
    )
    async with state.store.engine.connect() as conn:
        rows = (await conn.execute(query)).mappings().all()
    return [
        {
            "deletion_id": r["id"],
            "status": r["status"],
            "reason": r["reason"],
            "scope": (r["selector"] or {}).get("kind"),
            "counts": r["counts"] or {},
            "created_at": r["created_at"].isoformat(),
            "completed_at": r["completed_at"].isoformat() if r["completed_at"] else None,
            "receipt_hash": r["receipt_hash"],
        }
        for r in rows
    ]


async def build_export(state: ApiState, tenant: str, owner: str) -> dict[str, Any]:
    """The whole export document (also what the person's page downloads)."""
    records = await all_memories(state, tenant, owner)
    return {
        "format": EXPORT_FORMAT,
        "exported_at": datetime.now(UTC).isoformat(),
        "tenant": tenant,
        "owner_id": owner,
        "settings": {"memory_enabled": await state.store.get_settings(tenant, owner)},
        "counts": {s.value: n for s in Status if (n := sum(1 for r in records if r.status is s))},
        "memories": [MemoryOut.of(r).model_dump(mode="json") for r in records],
        "deletions": await subject_deletions(state, tenant, owner),
    }


async def audited_export(state: ApiState, actor: str, tenant: str, owner: str) -> dict[str, Any]:
    """The export, recorded in the audit log (who exported whose memories, and how many; no content)."""
    document = await build_export(state, tenant, owner)
    await state.store.append_audit(
        AuditEventIn(
            tenant_id=tenant,
            actor=actor,
            operation="export",
            namespace=namespace_label(Namespace(tenant_id=tenant, scope=Scope.USER, owner_id=owner)),
            reason="subject_access",
            details={"memories": len(document["memories"]), "deletions": len(document["deletions"])},
        )
    )
    return document


@router.get("/export")
async def export(
    state: State,
    caller: Caller,
    owner_id: Annotated[str | None, Query(min_length=1, max_length=256, description="privacy role only")] = None,
) -> dict[str, Any]:
    """Everything held about the subject, history included: a user's own, or any subject's for privacy."""
    if caller.role is Role.USER:
        if owner_id not in (None, caller.sub):
            raise Problem(403, "owner_mismatch", "a user exports only their own memories", field="owner_id")
        owner = caller.sub
    elif caller.role is Role.PRIVACY:
        if owner_id is None:
            raise Problem(422, "validation_failed", "owner_id names the subject to export", field="owner_id")
        owner = owner_id
    else:
        raise Problem(403, "forbidden_role", f"role {caller.role.value} may not export a subject")
    return await audited_export(state, caller.actor, caller.tenant, owner)
