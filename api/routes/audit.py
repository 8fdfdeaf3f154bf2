"""`/v1/audit`: the tenant's audit events (no content), and verification of the whole chain.

Operators and privacy officers only: they prove what happened without reading what was said.
The chain is global (one order for every tenant), so verification walks all of it; what it
reports is positions, hashes and reason codes, never another tenant's event.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel

from api.problems import Problem
from api.state import Caller, State, require_roles
from memwarden.audit_heads import HeadPublishError, audit_heads
from memwarden.identity import Role
from memwarden.stores.audit import AuditEvent, AuditVerification

router = APIRouter(prefix="/v1/audit", tags=["audit"])

AUDIT_ROLES = (Role.OPERATOR, Role.PRIVACY)


class Order(StrEnum):
    NEWEST = "newest"
    OLDEST = "oldest"


class AuditPage(BaseModel):
    items: list[AuditEvent]
    next_cursor: str | None = None


class AuditVerifyOut(AuditVerification):
    trusted_keys: list[str]
    """Ids of the public keys checkpoints were checked against."""


def _aware(value: datetime | None, field: str) -> datetime | None:
    if value is not None and (value.tzinfo is None or value.utcoffset() is None):
        raise Problem(422, "validation_failed", f"{field} needs a time zone (e.g. Z or +00:00)", field=field)
    return value


@router.get("", response_model=AuditPage)
async def list_audit(
    state: State,
    caller: Caller,
    memory_id: Annotated[str | None, Query(max_length=128)] = None,
    deletion_id: Annotated[str | None, Query(max_length=128)] = None,
    actor: Annotated[str | None, Query(max_length=300, description="e.g. agent:planner-svc")] = None,
    operation: Annotated[str | None, Query(max_length=64)] = None,
    since: Annotated[datetime | None, Query(description="inclusive, ISO 8601 with zone")] = None,
    until: Annotated[datetime | None, Query(description="exclusive, ISO 8601 with zone")] = None,
    order: Order = Order.NEWEST,
    limit: Annotated[int | None, Query(ge=1)] = None,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> AuditPage:
    require_roles(caller, *AUDIT_ROLES)
    settings = state.settings
    size = limit or settings.default_page_size
    if size > settings.max_page_size:
        raise Problem(422, "validation_failed", f"limit is at most {settings.max_page_size}", field="limit")
    since, until = _aware(since, "since"), _aware(until, "until")
    if since is not None and until is not None and until <= since:
        raise Problem(422, "validation_failed", "until must be after since", field="until")
    try:
        events, next_cursor = await state.store.list_audit(
            caller.tenant,
            memory_id=memory_id,
            deletion_id=deletion_id,
            actor=actor,
            operation=operation,
            since=since,
            until=until,
            oldest_first=order is Order.OLDEST,
            limit=size,
            cursor=cursor,
        )
    except ValueError:
        raise Problem(422, "validation_failed", "cursor is not valid", field="cursor") from None
    return AuditPage(items=events, next_cursor=next_cursor)


@router.get("/verify", response_model=AuditVerifyOut)
async def verify_audit(state: State, caller: Caller) -> AuditVerifyOut:
    """200 with `ok: false` and the first broken link when the chain fails: the check itself worked."""
    require_roles(caller, *AUDIT_ROLES)
    settings = state.settings
    verifier = settings.audit_verifier
    try:
        published = await audit_heads(settings).published()
    except HeadPublishError:
        raise Problem(503, "audit_heads_unavailable", "the published audit heads could not be read") from None
    result = await state.store.verify_audit_chain(
        verifier, require_every=settings.audit_checkpoint_every, published=published
    )
    return AuditVerifyOut(**result.model_dump(), trusted_keys=sorted(verifier.key_ids))
