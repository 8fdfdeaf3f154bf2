"""A shared store's moderation queue: what waits for review, and settling it in bulk.

`GET /v1/stores/{store}/pending` lists the store's pending writes (content, writer, the write's reason
and the gate's staging code, age) for its moderators; `POST /v1/stores/{store}/pending/settle` confirms
or declines many at once. Each settle is the very same one-by-one path (`memories._settle`: the
PendingWriteWorkflow's `settle` update), so the confirmation window, the gate's commit and the audit
are unchanged, and a moderator may not settle a write they proposed.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import sqlalchemy as sa
from fastapi import APIRouter, Body, Query
from pydantic import BaseModel, ConfigDict, Field

from api.problems import Problem
from api.routes.memories import _settle
from api.state import Caller, State
from memwarden.identity import Principal, Role
from memwarden.records import Scope, SettleAction, Status
from memwarden.stores.sql.rows import _row_to_record
from memwarden.stores.sql_models import audit_events, memories

router = APIRouter(prefix="/v1/stores", tags=["moderation"])

_STORE = Field(min_length=1, max_length=128)


class SettleMany(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: Literal["confirm", "decline"]
    memory_ids: list[Annotated[str, Field(min_length=1, max_length=256)]] = Field(min_length=1, max_length=100)


def _moderator(caller: Principal, store: str) -> None:
    if caller.role not in (Role.USER, Role.AGENT):
        raise Problem(403, "forbidden_role", f"role {caller.role.value} does not moderate stores")
    if store not in caller.moderates:
        raise Problem(403, "not_moderator", "this principal does not moderate that store", field="store")


@router.get("/{store}/pending")
async def pending(
    state: State,
    caller: Caller,
    store: str,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
) -> dict[str, Any]:
    """Oldest first: what has waited longest comes first, and the window closes on it first."""
    if len(store) > 128:
        raise Problem(422, "validation_failed", "store is at most 128 characters", field="store")
    _moderator(caller, store)
    m = memories.c
    now = datetime.now(UTC)
    async with state.store.engine.connect() as conn:
        rows = (
            await conn.execute(
                sa.select(memories)
                .where(
                    m.tenant_id == caller.tenant,
                    m.scope == Scope.SHARED.value,
                    m.store == store,
                    m.status == Status.PENDING.value,
                )
                .order_by(m.created_at, m.id)
                .limit(limit)
            )
        ).mappings()
        records = [_row_to_record(r) for r in rows]
        a = audit_events.c
        staged = {
            row.memory_id: row.reason
            for row in await conn.execute(
                sa.select(a.memory_id, a.reason).where(
                    a.tenant_id == caller.tenant,
                    a.operation == "stage",
                    a.memory_id.in_([r.id for r in records] or [""]),
                )
            )
        }
    items = [
        {
            "memory_id": r.id,
            "content": r.content,
            "type": r.type.value,
            "slot": r.slot,
            "writer": r.provenance.writer,
            "source_kind": r.source_kind.value,
            "reason": r.reason,
            "reason_codes": [c for c in (staged.get(r.id), r.reason) if c],
            "supersedes": r.supersedes,
            "created_at": r.created_at.isoformat(),
            "age_seconds": max(int((now - r.created_at).total_seconds()), 0),
            "own_write": r.provenance.writer == caller.actor,
        }
        for r in records
    ]
    return {"store": store, "items": items}


@router.post("/{store}/pending/settle")
async def settle_many(state: State, caller: Caller, store: str, body: Annotated[SettleMany, Body()]) -> dict[str, Any]:
    """Each id through the one-by-one settle; each answers for itself (one refusal does not stop the rest)."""
    if len(store) > 128:
        raise Problem(422, "validation_failed", "store is at most 128 characters", field="store")
    _moderator(caller, store)
    action = SettleAction(body.action)
    results: list[dict[str, Any]] = []
    for i, memory_id in enumerate(dict.fromkeys(body.memory_ids)):
        record = await state.store.get_memory(caller.tenant, memory_id)
        if record is None or record.scope is not Scope.SHARED or record.store != store:
            results.append({"memory_id": memory_id, "status": 404, "code": "not_found", "field": f"memory_ids.{i}"})
            continue
        try:
            answer = await _settle(state, caller, memory_id, action)
        except Problem as exc:
            results.append({"memory_id": memory_id, "status": exc.status, "code": exc.code, "field": f"memory_ids.{i}"})
            continue
        results.append(
            {"memory_id": memory_id, "status": 200, "decision": answer.decision.value, "reason": answer.reason}
        )
    return {"store": store, "action": body.action, "results": results}
