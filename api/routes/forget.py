"""Forget over HTTP: `DELETE /v1/memories/{id}`, `POST /v1/forget`, `GET /v1/deletions/{id}`.

The tombstone is written here, synchronously, before the 202: once the client has the deletion id,
no retrieval returns the memories (search re-checks eligibility in the store, which never lags).
ForgetWorkflow then purges every sink and issues the receipt. The same request twice answers the
same deletion; a request whose workflow could not be started answers 503 with the deletion id,
and repeating it starts the workflow (the tombstone is already in place).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body
from opentelemetry import trace
from pydantic import BaseModel
from temporalio.client import WorkflowExecutionStatus
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from api.problems import Problem
from api.state import ApiState, Caller, State
from api.telemetry import traced
from memwarden import telemetry
from memwarden.forget import (
    ForgetRequest,
    MemorySelector,
    OwnerSelector,
    SlotSelector,
    redacted,
    selector_key,
    subject_hash,
)
from memwarden.identity import Principal, Role
from memwarden.records import ForgetInput
from memwarden.stores.audit import AuditEventIn
from memwarden.stores.forget import DeletionRow, ForgetStore, MemoryNotFound, build_receipt
from memwarden.stores.tombstones import is_requester, owned_by, owner_hash, requester_hash
from workflows.forget import ForgetWorkflow

router = APIRouter(prefix="/v1", tags=["forget"])

_USER_KINDS = ("memory", "slot", "owner")
_OPERATOR_KINDS = ("memory", "slot", "owner", "agent", "source", "expired")
_PRIVACY_KINDS = (*_OPERATOR_KINDS, "tenant")


class DeletionAccepted(BaseModel):
    deletion_id: str
    status: str
    workflow_id: str


def _authorize(caller: Principal, request: ForgetRequest) -> None:
    kind = request.selector.kind
    allowed = {Role.USER: _USER_KINDS, Role.OPERATOR: _OPERATOR_KINDS, Role.PRIVACY: _PRIVACY_KINDS}.get(caller.role)
    if allowed is None:
        raise Problem(403, "forbidden_role", f"role {caller.role.value} may not request a deletion")
    if kind not in allowed:
        raise Problem(
            403, "forbidden_selector", f"role {caller.role.value} may not use selector {kind}", field="selector.kind"
        )
    selector = request.selector
    if caller.role is Role.USER and isinstance(selector, OwnerSelector | SlotSelector):
        if selector.owner_id != caller.sub:
            raise Problem(403, "owner_mismatch", "a user may erase only their own memories", field="selector.owner_id")


async def _memory_subject(state: ApiState, caller: Principal, memory_id: str) -> str:
    """The owner of one memory; 404 when it is not this caller's to delete (existence is not revealed)."""
    record = await state.store.get_memory(caller.tenant, memory_id)
    mine = record is not None and owned_by(state.pseudonyms, caller.tenant, record.owner_id, caller.sub)
    if record is None or (caller.role is Role.USER and not mine):
        raise Problem(404, "not_found", "no such memory", field="memory_id")
    return record.owner_id


async def _forget(
    state: ApiState, caller: Principal, request: ForgetRequest, *, authorized: bool = False
) -> DeletionAccepted:
    """`authorized`: the caller's right to this selector was checked by the route (a moderator forgetting
    what a rollback quarantined in their store, `api.routes.remediation`)."""
    telemetry.set_attributes(trace.get_current_span(), {telemetry.SELECTOR_KIND: request.selector.kind})
    if not authorized:
        _authorize(caller, request)
    key = state.subject_key
    selector = request.selector
    body = redacted(selector, key, caller.tenant)
    if isinstance(selector, MemorySelector):
        owner = await _memory_subject(state, caller, selector.memory_id)
        subject = owner_hash(key, caller.tenant, owner)  # a tombstone's owner is a pseudonym already
    else:
        subject = body.get("subject_hash")
    forget = ForgetStore(state.store, state.settings.retention_classes)
    now = datetime.now(UTC)
    try:
        row, _ = await forget.begin(
            tenant_id=caller.tenant,
            requester=caller.actor,
            selector=selector,
            redacted_selector=body,
            selector_key=selector_key(caller.tenant, body),
            reason=request.reason,
            subject_hash=subject,
            now=now,
            handle_hash=subject_hash(state.handle_key, caller.tenant, selector.owner_id)
            if isinstance(selector, OwnerSelector)
            else None,
        )
    except MemoryNotFound:
        raise Problem(404, "not_found", "no such memory", field="memory_id") from None
    # Appended for a repeated request too (the id is the deletion's, so once): a request whose first try
    # died between `begin` and this append is on record after the caller retries it.
    await state.store.append_audit(
        AuditEventIn(
            id=f"forget-request-{row.id}",
            at=now,
            tenant_id=row.tenant_id,
            actor=caller.actor,
            operation="forget_requested",
            reason=request.reason,
            workflow_id=row.workflow_id,
            deletion_id=row.id,
            details={"selector": body, "counts": row.counts or {}, "subject_hash": subject},
        )
    )
    # Ids, the selector's kind and counts only: never the owner id a selector may name.
    telemetry.set_attributes(
        trace.get_current_span(),
        {
            telemetry.GEN_AI_MEMORY_RECORD_COUNT: int((row.counts or {}).get("memories", 0)),
            telemetry.GEN_AI_MEMORY_RECORD_ID: selector.memory_id if isinstance(selector, MemorySelector) else None,
            telemetry.OUTCOME: row.status,
        },
    )
    if row.status != "verified":
        await _start(state, row)
    return DeletionAccepted(deletion_id=row.id, status=row.status, workflow_id=row.workflow_id or "")


async def _start(state: ApiState, row: DeletionRow) -> None:
    try:
        await state.temporal.start_workflow(
            ForgetWorkflow.run,
            ForgetInput(deletion_id=row.id, tenant_id=row.tenant_id),
            id=row.workflow_id or f"forget-{row.id}",
            task_queue=state.settings.temporal_task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
        )
    except WorkflowAlreadyStartedError:
        pass
    except Exception:
        raise Problem(
            503,
            "forget_not_started",
            "the memories are tombstoned; purging could not be started, repeat the request",
            extra={"deletion_id": row.id, "deletion_status": row.status},
        ) from None


@router.delete("/memories/{memory_id}", status_code=202, response_model=DeletionAccepted)
@traced(telemetry.DELETE_MEMORY)
async def delete_memory(state: State, caller: Caller, memory_id: str) -> DeletionAccepted:
    """Forget one memory and every version of its slot chain (the owner only)."""
    if caller.role is not Role.USER:
        raise Problem(403, "forbidden_role", f"role {caller.role.value} deletes through POST /v1/forget")
    if len(memory_id) > 256:
        raise Problem(404, "not_found", "no such memory", field="memory_id")
    request = ForgetRequest(selector=MemorySelector(memory_id=memory_id), reason="owner_request")
    return await _forget(state, caller, request)


@router.post("/forget", status_code=202, response_model=DeletionAccepted)
@traced(telemetry.DELETE_MEMORY)
async def forget(state: State, caller: Caller, body: Annotated[ForgetRequest, Body()]) -> DeletionAccepted:
    """Erase by selector: a memory, a slot, an owner, an agent's store, a source record, a tenant."""
    return await _forget(state, caller, body)


def receipt_view(row: DeletionRow, sinks: list[Any]) -> dict[str, Any]:
    return {
        "deletion_id": row.id,
        "status": row.status,
        "reason": row.reason,
        "selector": row.selector,
        "scope": row.selector.get("kind"),
        "subject_hash": row.subject_hash,
        "counts": row.counts or {},
        "sinks": [
            {
                "name": s.name,
                "method": s.method,
                "status": s.status,
                "purged": s.purged,
                "attempts": s.attempts,
                "workflow_id": s.workflow_id,
                "run_id": s.run_id,
                "started_at": s.started_at.isoformat() if s.started_at else None,
                "verified_at": s.verified_at.isoformat() if s.verified_at else None,
                "evidence": s.evidence,
            }
            for s in sinks
        ],
        "receipt_hash": row.receipt_hash,
        "audit_event_id": row.audit_event_id,
        "workflow_id": row.workflow_id,
        "created_at": row.created_at.isoformat(),
        "completed_at": row.completed_at.isoformat() if row.completed_at else None,
    }


@router.get("/deletions/{deletion_id}")
async def get_deletion(state: State, caller: Caller, deletion_id: str) -> dict[str, Any]:
    """The receipt: for the requester, privacy officers and operators of the tenant."""
    forget = ForgetStore(state.store, state.settings.retention_classes)
    row = await forget.get(caller.tenant, deletion_id) if len(deletion_id) <= 64 else None
    if row is None or not (
        caller.role in (Role.PRIVACY, Role.OPERATOR)
        or is_requester(state.pseudonyms, caller.tenant, row.requester, caller.actor)
    ):
        raise Problem(404, "not_found", "no such deletion", field="deletion_id")
    if row.status in ("tombstoned", "purging") and await _workflow_ended_without_receipt(state, row):
        await forget.set_status(row.tenant_id, row.id, "failed", datetime.now(UTC))
        row = await forget.get(caller.tenant, deletion_id) or row
    sinks = await forget.sinks(row.id)
    view = receipt_view(row, sinks)
    if row.status == "verified":
        # Exactly what was hashed: sha256 of its canonical JSON is `receipt_hash` (anyone can check it).
        requester = requester_hash(state.subject_key, row.tenant_id, row.requester)
        view["receipt"] = build_receipt(row, sinks, requester_hash=requester)
    return view


_ENDED = frozenset(
    {
        WorkflowExecutionStatus.FAILED,
        WorkflowExecutionStatus.TERMINATED,
        WorkflowExecutionStatus.CANCELED,
        WorkflowExecutionStatus.TIMED_OUT,
    }
)


async def _workflow_ended_without_receipt(state: ApiState, row: DeletionRow) -> bool:
    """A ForgetWorkflow that failed or was terminated leaves its deletion `failed` (repeat to restart)."""
    try:
        described = await state.temporal.get_workflow_handle(row.workflow_id or "").describe()
    except Exception:  # not started yet, or Temporal unreachable: nothing to conclude
        return False
    return described.status in _ENDED
