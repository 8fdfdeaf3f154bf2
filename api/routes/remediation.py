"""Remediation over HTTP: revert a supersession, roll back a writer, release or forget what was quarantined,
and ask who a memory reached.

- `POST /v1/memories/{id}/revert`: the live version's value goes back to the one it superseded, as a new
  version (RevertWorkflow, `revert-<id>`: the same request twice is one revert).
- `POST /v1/rollbacks`: the selected writes are quarantined here, in one transaction, before the answer
  (no read returns them from then on: every read re-checks the store); RollbackWorkflow then restores
  what each superseded, brings the derivatives in line and issues a receipt (`GET /v1/rollbacks/{id}`).
- `POST /v1/memories/{id}/release`, `POST /v1/rollbacks/{id}/forget`: the moderator's verdict on what
  a rollback quarantined.
- `GET /v1/memories/{id}/reads`: the audit log's read events that returned it (blast radius).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Body
from pydantic import BaseModel, ConfigDict, Field
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from api.problems import Problem
from api.routes.forget import DeletionAccepted, _forget
from api.state import ApiState, Caller, State
from api.telemetry import traced
from memwarden import telemetry
from memwarden.forget import ForgetRequest, QuarantinedSelector, subject_hash
from memwarden.identity import Principal, Role, read_filter
from memwarden.records import LIVE_STATUSES, MemoryRecord, RevertInput, RevertResult, RollbackInput, Scope, Status
from memwarden.remediation import RollbackRequest, build_rollback_receipt, redacted_selector, restored_id
from memwarden.stores.reads import read_history
from memwarden.stores.remediation import RemediationError, RemediationStore, RollbackRow
from workflows.remediation import RevertWorkflow, RollbackWorkflow, revert_workflow_id

router = APIRouter(prefix="/v1", tags=["remediation"])

_REVERT_PROBLEMS: dict[str, tuple[int, str]] = {
    "not_found": (404, "no such memory"),
    "not_live": (409, "only the live version of a memory can be reverted"),
    "nothing_to_revert": (409, "this version superseded nothing"),
    "predecessor_gone": (409, "the value it superseded is forgotten or expired"),
    "predecessor_quarantined": (409, "the value it superseded is quarantined: release it instead"),
    "not_quarantined": (409, "this memory is not quarantined"),
    "version_conflict": (409, "the memory changed meanwhile; read it again"),
}


class RevertOut(BaseModel):
    memory_id: str | None
    reverted: str
    restored_from: str | None
    outcome: str
    workflow_id: str


class RollbackAccepted(BaseModel):
    rollback_id: str
    status: str
    counts: dict[str, Any]
    workflow_id: str


class ForgetQuarantined(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="quarantined_write", min_length=1, max_length=64, pattern=r"^[a-z0-9_.-]+$")


def may_remediate(principal: Principal, record: MemoryRecord) -> bool:
    """Who may revert or release a memory: the one who settles its writes (`identity.may_settle`'s rule).

    A shared store's memory: its moderators. An agent's memory about no one: an operator. Anything else:
    the person it is about, signed in as a user.
    """
    if principal.tenant != record.tenant_id:
        return False
    if record.scope is Scope.SHARED:
        return principal.role in (Role.USER, Role.AGENT) and record.store in principal.moderates
    if record.owner_id.startswith("agent:"):
        return principal.role is Role.OPERATOR
    return principal.role is Role.USER and principal.sub == record.owner_id


def _visible(caller: Principal, record: MemoryRecord | None) -> bool:
    if record is None:
        return False
    if may_remediate(caller, record):
        return True
    if caller.role in (Role.USER, Role.AGENT):
        return read_filter(caller).model_copy(update={"statuses": tuple(Status)}).admits(record)
    return False


def _problem(code: str, field: str = "memory_id") -> Problem:
    status, detail = _REVERT_PROBLEMS.get(code, (409, code))
    return Problem(status, code, detail, field=field)


async def _run_revert(state: ApiState, caller: Principal, record: MemoryRecord, action: str) -> RevertOut:
    """RevertWorkflow under a fixed id: a repeated request meets the first run (or its result)."""
    workflow_id = revert_workflow_id(action, record.id)
    request = RevertInput(
        tenant_id=caller.tenant,
        memory_id=record.id,
        actor=state.pseudonyms.actor(caller.tenant, caller.actor),
        action=action,
    )
    try:
        result: RevertResult = await state.temporal.execute_workflow(
            RevertWorkflow.run,
            request,
            id=workflow_id,
            task_queue=state.settings.temporal_task_queue,
            execution_timeout=timedelta(seconds=state.settings.workflow_timeout_seconds),
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            request_eager_start=True,
        )
    except WorkflowAlreadyStartedError:
        result = await state.temporal.get_workflow_handle(workflow_id, result_type=RevertResult).result()
    except WorkflowFailureError:
        raise Problem(
            503, f"{action}_failed", f"the {action} could not be completed", extra={"workflow_id": workflow_id}
        ) from None
    if result.memory_id is None:
        raise _problem(result.outcome)
    return RevertOut(**result.model_dump(), workflow_id=workflow_id)


@router.post("/memories/{memory_id}/revert", response_model=RevertOut)
@traced(telemetry.UPDATE_MEMORY)
async def revert(state: State, caller: Caller, memory_id: str) -> RevertOut:
    """Undo the supersession this live version made: the value it replaced is live again, as a new version."""
    record = await state.store.get_memory(caller.tenant, memory_id) if len(memory_id) <= 256 else None
    if record is None or not _visible(caller, record):
        raise Problem(404, "not_found", "no such memory", field="memory_id")
    if not may_remediate(caller, record):
        raise Problem(403, "not_owner", "only the owner (or the shared store's moderator) reverts this memory")
    already = await state.store.get_memory(caller.tenant, restored_id("revert", memory_id))
    if already is None:
        if record.status not in LIVE_STATUSES:
            raise _problem("not_live")
        if record.supersedes is None:
            raise _problem("nothing_to_revert")
    return await _run_revert(state, caller, record, "revert")


@router.post("/memories/{memory_id}/release", response_model=RevertOut)
@traced(telemetry.UPDATE_MEMORY)
async def release(state: State, caller: Caller, memory_id: str) -> RevertOut:
    """A quarantined write goes back into use (the moderator's verdict: it was not poisoned after all)."""
    record = await state.store.get_memory(caller.tenant, memory_id) if len(memory_id) <= 256 else None
    if record is None or not (_visible(caller, record) or caller.role in (Role.OPERATOR, Role.PRIVACY)):
        raise Problem(404, "not_found", "no such memory", field="memory_id")
    allowed = may_remediate(caller, record) or (record.scope is not Scope.SHARED and caller.role is Role.OPERATOR)
    if not allowed:
        raise Problem(403, "not_moderator", "only the store's moderator (or the owner) releases a quarantined write")
    if record.scope is Scope.SHARED and record.provenance.writer == caller.actor:
        raise Problem(403, "own_write", "a moderator may not release their own write")
    if record.status not in (Status.QUARANTINED, Status.ACTIVE, Status.SUPERSEDED):
        raise _problem("not_quarantined")  # a release already done answers as it did (the activity knows)
    return await _run_revert(state, caller, record, "release")


# -- rollbacks -----------------------------------------------------------------------------------


def _authorize_rollback(caller: Principal, request: RollbackRequest) -> None:
    if caller.role in (Role.OPERATOR, Role.PRIVACY):
        return
    if caller.role in (Role.USER, Role.AGENT) and caller.moderates:
        if request.store is None:
            raise Problem(
                422, "validation_failed", "a moderator rolls back within a store they moderate", field="store"
            )
        if request.store not in caller.moderates:
            raise Problem(403, "not_moderator", "this principal does not moderate that store", field="store")
        return
    raise Problem(403, "forbidden_role", f"role {caller.role.value} may not roll back writes")


@router.post("/rollbacks", status_code=202, response_model=RollbackAccepted)
@traced(telemetry.UPDATE_MEMORY)
async def rollback(state: State, caller: Caller, body: Annotated[RollbackRequest, Body()]) -> RollbackAccepted:
    """Quarantine every matching write now, then restore, re-derive and issue a receipt (RollbackWorkflow)."""
    _authorize_rollback(caller, body)
    redacted = redacted_selector(body.selector, state.subject_key, caller.tenant)
    remediation = RemediationStore(state.store)
    try:
        row, created = await remediation.quarantine(
            tenant_id=caller.tenant,
            requester=caller.actor,
            selector=body.selector,
            redacted=redacted,
            reason=body.reason,
            store=body.store,
            now=datetime.now(UTC),
        )
    except RemediationError as exc:
        field = exc.field if exc.index is None else f"{exc.field}.{exc.index}"
        detail = "no such memory" if exc.code == "not_found" else "the selector matches no write in use"
        raise Problem(404, exc.code, detail, field=field) from None
    if created:
        telemetry.metrics().record_rollback(body.selector.kind, int((row.counts or {}).get("quarantined", 0)))
    if row.status != "verified":
        try:
            await state.temporal.start_workflow(
                RollbackWorkflow.run,
                RollbackInput(rollback_id=row.id, tenant_id=row.tenant_id),
                id=row.workflow_id,
                task_queue=state.settings.temporal_task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
        except WorkflowAlreadyStartedError:
            pass
        except Exception:
            raise Problem(
                503,
                "rollback_not_started",
                "the writes are quarantined; restoring could not be started, repeat the request",
                extra={"rollback_id": row.id},
            ) from None
    return RollbackAccepted(rollback_id=row.id, status=row.status, counts=row.counts or {}, workflow_id=row.workflow_id)


async def _moderates_members(state: ApiState, caller: Principal, row: RollbackRow) -> bool:
    """A moderator sees a rollback that quarantined writes in a store they moderate (an operator's, say)."""
    if caller.role not in (Role.USER, Role.AGENT) or not caller.moderates:
        return False
    if row.store is not None:
        return row.store in caller.moderates
    members = await RemediationStore(state.store).members(row.tenant_id, row.id)
    found = await state.store.get_many(row.tenant_id, [m["memory_id"] for m in members])
    return any(r.scope is Scope.SHARED and r.store in caller.moderates for r in found.values())


async def _rollback_row(state: ApiState, caller: Principal, rid: str) -> tuple[RollbackRow, bool]:
    """The rollback and whether the caller sees it as a moderator (404 when they may not see it at all)."""
    row = await RemediationStore(state.store).get(caller.tenant, rid) if len(rid) <= 64 else None
    if row is None:
        raise Problem(404, "not_found", "no such rollback", field="rollback_id")
    if caller.role in (Role.OPERATOR, Role.PRIVACY) or row.requester == caller.actor:
        return row, False
    if await _moderates_members(state, caller, row):
        return row, True
    raise Problem(404, "not_found", "no such rollback", field="rollback_id")


@router.get("/rollbacks/{rollback_id}")
async def get_rollback(state: State, caller: Caller, rollback_id: str) -> dict[str, Any]:
    """The rollback and, once every sink is checked, its receipt (the document `receipt_hash` hashes)."""
    row, _ = await _rollback_row(state, caller, rollback_id)
    remediation = RemediationStore(state.store)
    if row.status != "verified" and await _workflow_ended(state, row.workflow_id):
        # Terminated or failed without a receipt: say so (repeating the request starts it again).
        row = row.model_copy(update={"status": "failed"})
    sinks = await remediation.sinks(row.id)
    members = await remediation.members(row.tenant_id, row.id)
    current = await state.store.get_many(row.tenant_id, [m["memory_id"] for m in members])
    view: dict[str, Any] = {
        "rollback_id": row.id,
        "status": row.status,
        "reason": row.reason,
        "store": row.store,
        "selector": row.selector,
        "counts": row.counts or {},
        "members": [
            {
                "memory_id": m["memory_id"],
                "prior_status": m["prior_status"],
                "status": current[m["memory_id"]].status.value if m["memory_id"] in current else None,
                "outcome": m["outcome"],
                "restored_id": m["restored_id"],
            }
            for m in members
        ],
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
            for s in sinks
        ],
        "receipt_hash": row.receipt_hash,
        "audit_event_id": row.audit_event_id,
        "workflow_id": row.workflow_id,
        "created_at": row.created_at.isoformat(),
        "completed_at": row.completed_at.isoformat() if row.completed_at else None,
    }
    if row.status == "verified" and row.completed_at is not None:
        requester = subject_hash(state.subject_key, row.tenant_id, row.requester)
        view["receipt"] = build_rollback_receipt(
            row.model_dump(), sinks, requester_hash=requester, completed_at=row.completed_at
        )
    return view


_ENDED = frozenset(
    {
        WorkflowExecutionStatus.FAILED,
        WorkflowExecutionStatus.TERMINATED,
        WorkflowExecutionStatus.CANCELED,
        WorkflowExecutionStatus.TIMED_OUT,
    }
)


async def _workflow_ended(state: ApiState, workflow_id: str) -> bool:
    try:
        described = await state.temporal.get_workflow_handle(workflow_id).describe()
    except Exception:  # not started yet, or Temporal unreachable: nothing to conclude
        return False
    return described.status in _ENDED


@router.post("/rollbacks/{rollback_id}/forget", status_code=202, response_model=DeletionAccepted)
async def forget_quarantined(
    state: State, caller: Caller, rollback_id: str, body: Annotated[ForgetQuarantined | None, Body()] = None
) -> DeletionAccepted:
    """Forget what this rollback quarantined and nobody released: a deletion like any other, with its receipt."""
    row, moderator = await _rollback_row(state, caller, rollback_id)
    if not (moderator or caller.role in (Role.OPERATOR, Role.PRIVACY)):
        raise Problem(403, "not_moderator", "only the store's moderator (or an operator) forgets quarantined writes")
    reason = (body or ForgetQuarantined()).reason
    stores = sorted(caller.moderates) if moderator else None
    request = ForgetRequest(selector=QuarantinedSelector(rollback_id=row.id, stores=stores), reason=reason)
    return await _forget(state, caller, request, authorized=True)


# -- blast radius --------------------------------------------------------------------------------


@router.get("/memories/{memory_id}/reads")
async def reads(state: State, caller: Caller, memory_id: str) -> dict[str, Any]:
    """Who retrieved this memory, when, in how many searches, from the audit log's read events (no content)."""
    record = await state.store.get_memory(caller.tenant, memory_id) if len(memory_id) <= 256 else None
    allowed = record is not None and (
        caller.role in (Role.OPERATOR, Role.PRIVACY)
        or may_remediate(caller, record)
        or (caller.role is Role.USER and record.owner_id == caller.sub)
    )
    if record is None or not allowed:
        raise Problem(404, "not_found", "no such memory", field="memory_id")
    history = await read_history(state.store, caller.tenant, [memory_id])
    return {"memory_id": memory_id, "status": record.status.value, **history.view()}
