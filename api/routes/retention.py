"""`PUT /v1/memories/{id}/retention`: an operator or privacy officer assigns a memory's retention class.

Why a route of its own: a retention class (a legal hold, an age limit; `MEMWARDEN_RETENTION_CLASSES`)
decides what the expiry sweep may take, so it is an operator's decision about a record, never an
agent's proposal: agents and people cannot set it, and every change is an audit event. A hold stops
the retention sweep only; it does not stop an erasure the person or a privacy officer asks for.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Body
from pydantic import BaseModel, ConfigDict, Field

from api.problems import Problem
from api.state import Caller, State
from memwarden.identity import Role
from memwarden.records import CONTENT_GONE_STATUSES
from memwarden.stores.sql import ConcurrencyConflict

router = APIRouter(prefix="/v1/memories", tags=["retention"])

ASSIGNERS = frozenset({Role.OPERATOR, Role.PRIVACY})


class RetentionIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    retention_class: str = Field(min_length=1, max_length=64, description="A class configured in retention_classes.")


class RetentionOut(BaseModel):
    memory_id: str
    retention_class: str
    previous: str


@router.put("/{memory_id}/retention", response_model=RetentionOut)
async def put_retention(
    memory_id: str, state: State, caller: Caller, body: Annotated[RetentionIn, Body()]
) -> RetentionOut:
    if caller.role not in ASSIGNERS:
        raise Problem(403, "forbidden_role", "only an operator or a privacy officer assigns retention classes")
    classes = state.settings.retention_classes
    if body.retention_class not in classes:
        raise Problem(
            422,
            "unknown_retention_class",
            f"not a configured retention class (configured: {', '.join(sorted(classes))})",
            field="retention_class",
        )
    try:
        changed = await state.store.set_retention_class(
            caller.tenant,
            memory_id,
            body.retention_class,
            now=datetime.now(UTC),
            actor=caller.actor,
            reason="retention_class_set",
        )
    except ConcurrencyConflict:
        raise Problem(409, "version_conflict", "the memory changed meanwhile; try again") from None
    if changed is None:
        raise Problem(404, "not_found", "no such memory", field="memory_id")
    previous, updated = changed
    if updated.status in CONTENT_GONE_STATUSES:
        raise Problem(409, "content_gone", f"the memory is {updated.status.value}: nothing is left to retain")
    return RetentionOut(memory_id=memory_id, retention_class=updated.retention_class, previous=previous)
