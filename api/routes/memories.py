"""`/v1/memories`: propose a memory, list one's own, read one with its history."""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Body, Query
from temporalio.client import WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from api.prescreen import KeyReused, prescreen, record_rejection, rejected_before
from api.problems import Problem
from api.routes.settings import memory_enabled
from api.schemas import MemoryDetail, MemoryOut, MemoryPage, RememberOut
from api.state import ApiState, Caller, State
from api.telemetry import traced
from memwarden.identity import (
    Forbidden,
    Principal,
    Role,
    check_source_kind,
    may_settle,
    read_filter,
    write_target,
)
from memwarden.records import (
    CandidateIn,
    Decision,
    MemoryRecord,
    Provenance,
    ReadFilter,
    RememberInput,
    RememberResult,
    Scope,
    SettleAction,
    SettleRequest,
    SourceRef,
    Status,
    content_hash,
)
from memwarden.stores.audit import is_pseudonym
from memwarden.stores.sources import SourceRegistry
from memwarden.stores.subjects import handle_row, new_handle
from memwarden.telemetry import CREATE_MEMORY
from memwarden.temporal.names import pending_workflow_id
from workflows.pending import PendingWriteWorkflow
from workflows.remember import RememberWorkflow

router = APIRouter(prefix="/v1/memories", tags=["memories"])

_IDEMPOTENCY_NS = uuid.UUID("6f1d7c52-3a0e-4d59-9b8e-2c7a4f0e9d11")
CLAIM_CHECK_TTL = timedelta(days=1)


def _memory_id(tenant: str, actor: str, key: str | None) -> str:
    """A fresh id, or one fixed by the caller's idempotency key (same key, same record)."""
    if key is None:
        return str(uuid.uuid4())
    return str(uuid.uuid5(_IDEMPOTENCY_NS, f"{tenant}\x00{actor}\x00{key}"))


def _scoped_key(actor: str, key: str | None) -> str | None:
    return hashlib.sha256(f"{actor}\x00{key}".encode()).hexdigest()[:40] if key else None


def _nul_field(value: object, path: str = "") -> str | None:
    """The first field holding a NUL character: PostgreSQL text and jsonb cannot store one (bad input, not a 500)."""
    if isinstance(value, str):
        return (path or "body") if "\x00" in value else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = _nul_field(item, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
    return None


@router.post("", response_model=RememberOut, status_code=200)
@traced(CREATE_MEMORY)
async def propose(state: State, caller: Caller, candidate: Annotated[CandidateIn, Body()]) -> RememberOut:
    memory_id = _memory_id(caller.tenant, caller.actor, candidate.idempotency_key)
    request = admit(state, caller, candidate, memory_id)
    workflow_id = f"remember-{memory_id}"
    digest = request.content_hash
    if request.idempotency_key is not None:
        replay = await _replay(state, workflow_id, request.idempotency_key, caller.tenant, digest)
        if replay is not None:
            return replay
    now = datetime.now(UTC)
    result = await remember(state, request, candidate.content, now, workflow_id, digest)
    return RememberOut(
        decision=result.decision,
        reason=result.reason,
        memory_id=result.memory_id,
        supersedes=result.supersedes,
        workflow_id=workflow_id,
    )


def admit(state: ApiState, caller: Principal, candidate: CandidateIn, memory_id: str) -> RememberInput:
    """Everything the API decides about a proposal before the gate, as the gate's input; a Problem if refused.

    The content's size and field rules, the source kind the token may declare, where the caller may write
    and the source_ref it may vouch for; `provenance.writer` from the token. A bulk import admits each of
    its lines through this same function.
    """
    settings = state.settings
    if len(candidate.content) > settings.max_content_chars:
        raise Problem(
            413, "content_too_large", f"content exceeds {settings.max_content_chars} characters", field="content"
        )
    if not candidate.content.strip():
        raise Problem(422, "validation_failed", "content is blank", field="content")
    nul = _nul_field(candidate.model_dump(mode="json"))
    if nul is not None:
        raise Problem(422, "validation_failed", "a field contains a NUL character", field=nul)
    try:
        check_source_kind(caller, candidate.source_kind)
    except Forbidden as exc:
        raise Problem(
            403, exc.reason, f"this principal may not declare this source ({exc.reason})", field="source_kind"
        ) from None
    try:
        target = write_target(caller, scope=candidate.scope, owner_id=candidate.owner_id, store=candidate.store)
    except Forbidden as exc:
        raise Problem(403, exc.reason, f"this principal may not write there ({exc.reason})", field="scope") from None
    if candidate.source_ref is not None:
        _vouch(state, caller, candidate.source_ref, target.tenant_id, target.owner_id)
    # Who wrote it is the token's to say: a body's `writer` would let anyone put words in someone's mouth.
    provenance = (candidate.provenance or Provenance()).model_copy(update={"writer": caller.actor})
    return RememberInput(
        memory_id=memory_id,
        candidate_ref=memory_id,
        content_hash=content_hash(candidate.content),
        content_chars=len(candidate.content),
        tenant_id=target.tenant_id,
        owner_id=target.owner_id,
        scope=target.scope,
        agent_id=target.agent_id,
        store=target.store,
        type=candidate.type,
        slot=candidate.slot,
        source_kind=candidate.source_kind,
        source_ref=candidate.source_ref,
        provenance=provenance,
        reason=candidate.reason,
        importance=candidate.importance,
        sensitivity=candidate.sensitivity,
        ttl_seconds=candidate.ttl_seconds,
        idempotency_key=_scoped_key(caller.actor, candidate.idempotency_key),
        actor=caller.actor,
        confirm_requested=candidate.confirm_requested,
    )


def _vouch(state: ApiState, caller: Principal, ref: SourceRef, tenant: str, owner: str) -> None:
    """Refuse a source_ref its writer cannot vouch for: the service would fetch that record into this namespace."""
    registry = state.sources or SourceRegistry([])
    refusal = registry.vouch(
        ref, system_principal=caller.sub if caller.role is Role.SYSTEM else None, tenant=tenant, owner=owner
    )
    if refusal == "unsafe_source_key":
        raise Problem(
            422, "validation_failed", "source_ref.key is not one segment of the source's URL", field="source_ref.key"
        )
    if refusal is not None:
        raise Problem(403, refusal, f"this principal may not cite this source record ({refusal})", field="source_ref")


def _pseudonym(state: ApiState, caller: Principal) -> str:
    """The caller as the audit log names it (the only use a workflow has for who acted)."""
    return state.pseudonyms.actor(caller.tenant, caller.actor)


async def remember(
    state: ApiState, request: RememberInput, content: str, now: datetime, workflow_id: str, digest: str
) -> RememberResult:
    """Screen the write, park it, then run RememberWorkflow and return its decision.

    Screening comes first (`api.prescreen`): a candidate the gate's first steps reject is answered and
    audited here, and its text is never written anywhere. What passes is parked: the content and a
    subject handle (which keeps the owner's id and the writer out of history) are committed to the store
    in one transaction before the workflow starts, so the activity always finds them there, on whichever
    worker it runs; the screening travels with the input, so the detectors run once.
    """
    if request.idempotency_key is not None:
        try:
            before = await rejected_before(state, request)
        except KeyReused:
            raise _key_reused() from None
        if before is not None:
            return before
    screening, rejected = await prescreen(state, request, content)
    if rejected is not None:
        return await record_rejection(state, request, rejected)
    request = request.model_copy(update={"screening": screening})
    sealed, rows = _sealed_write(state, request, content, now)
    await state.store.put_candidates(rows)
    return await _execute_remember(state, sealed, workflow_id, digest)


def _sealed_write(
    state: ApiState, request: RememberInput, content: str, now: datetime
) -> tuple[RememberInput, list[tuple[str, str, str, datetime]]]:
    """The input history will hold, and the claim-check rows to park (the content, the subject handle).

    The handle keeps the owner's id, the writer and the speaker out of RememberWorkflow's history (erasing the owner
    deletes it), and the actor goes in as the audit log's pseudonym (it is only ever audited).
    """
    handle = new_handle(state.handle_key, request.tenant_id, request.owner_id)
    expires = now + CLAIM_CHECK_TTL
    ids: dict[str, str | None] = {"owner_id": request.owner_id, "writer": request.provenance.writer}
    if request.provenance.speaker is not None:
        ids["speaker"] = request.provenance.speaker
    rows = [
        (request.candidate_ref, request.tenant_id, content, expires),
        handle_row(handle, request.tenant_id, ids, expires),
    ]
    sealed = request.model_copy(
        update={
            "owner_id": "",
            "actor": state.pseudonyms.actor(request.tenant_id, request.actor),
            "provenance": request.provenance.model_copy(update={"writer": None, "speaker": None}),
            "subject_ref": handle,
        }
    )
    return sealed, rows


async def _execute_remember(state: ApiState, request: RememberInput, workflow_id: str, digest: str) -> RememberResult:
    """Run RememberWorkflow (eager start, one round trip) and return its decision; 503 when it failed."""
    settings = state.settings
    try:
        return await state.temporal.execute_workflow(
            RememberWorkflow.run,
            args=[request, settings.gate_policy],
            id=workflow_id,
            # Only a keyed write can be proposed again under this id (`_replay` compares the memo's hash);
            # an unkeyed one has a fresh id, and a memo costs the server a visibility write (~1 ms).
            memo={"content_hash": digest} if request.idempotency_key is not None else None,
            task_queue=settings.temporal_task_queue,
            execution_timeout=timedelta(seconds=settings.workflow_timeout_seconds),
            id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            request_eager_start=True,
        )
    except WorkflowAlreadyStartedError:
        handle = state.temporal.get_workflow_handle(workflow_id, result_type=RememberResult)
        return await handle.result()
    except WorkflowFailureError:
        raise Problem(
            503,
            "remember_failed",
            "the write could not be completed; nothing was stored",
            extra={"workflow_id": workflow_id},
        ) from None


def _key_reused() -> Problem:
    # Same key, different content: replaying the first answer would silently drop the new text.
    return Problem(
        409,
        "idempotency_key_reused",
        "this idempotency key was already used for a different memory",
        field="idempotency_key",
    )


async def _replay(state: ApiState, workflow_id: str, scoped_key: str, tenant: str, digest: str) -> RememberOut | None:
    """The first answer for a reused idempotency key (same key, same answer, one record), or None if new.

    The workflow's own result is the answer while its history is retained (it knows REJECT and NOOP too);
    after that, the stored record speaks for it.
    """
    handle = state.temporal.get_workflow_handle(workflow_id, result_type=RememberResult)
    try:
        described = await handle.describe()
    except RPCError as exc:
        if exc.status is not RPCStatusCode.NOT_FOUND:
            raise
    else:
        if await described.memo_value("content_hash", None) != digest:
            raise _key_reused()
        try:
            result = await handle.result()
        except WorkflowFailureError:
            result = None  # the first attempt failed and stored nothing: this one may try again
        if result is not None:
            return RememberOut(**result.model_dump(), workflow_id=workflow_id)
    existing = await state.store.find_by_idempotency_key(tenant, scoped_key)
    if existing is None:
        return None
    if existing.content_hash != digest:
        raise _key_reused()
    if existing.status is Status.PENDING:
        decision = Decision.PENDING
    else:
        decision = Decision.UPDATE if existing.supersedes else Decision.ADD
    return RememberOut(
        decision=decision,
        reason="replayed",
        memory_id=existing.id,
        supersedes=existing.supersedes,
        workflow_id=workflow_id,
    )


def _readable(caller: Caller, statuses: tuple[Status, ...]) -> ReadFilter:
    if caller.role not in (Role.USER, Role.AGENT):
        raise Problem(403, "forbidden_role", f"role {caller.role.value} cannot read memory content")
    return read_filter(caller).model_copy(update={"statuses": statuses})


DEFAULT_LIST_STATUSES = (Status.PENDING, Status.ACTIVE, Status.STALE)


@router.get("", response_model=MemoryPage)
async def list_memories(
    state: State,
    caller: Caller,
    status: Annotated[list[Status] | None, Query(description="Repeat to select several.")] = None,
    limit: Annotated[int | None, Query(ge=1)] = None,
    cursor: Annotated[str | None, Query(max_length=512)] = None,
) -> MemoryPage:
    settings = state.settings
    size = limit or settings.default_page_size
    if size > settings.max_page_size:
        raise Problem(422, "validation_failed", f"limit is at most {settings.max_page_size}", field="limit")
    rf = _readable(caller, tuple(status) if status else DEFAULT_LIST_STATUSES)
    if caller.role is Role.AGENT and not await memory_enabled(state, caller):
        return MemoryPage(items=[], next_cursor=None)  # off: agents read nothing; the person still sees it all
    try:
        records, next_cursor = await state.store.list_memories(rf, limit=size, cursor=cursor)
    except ValueError:
        raise Problem(422, "validation_failed", "cursor is not valid", field="cursor") from None
    return MemoryPage(items=[MemoryOut.of(r) for r in records], next_cursor=next_cursor)


def _unmasked(state: ApiState, rf: ReadFilter, record: MemoryRecord | None) -> MemoryRecord | None:
    """A tombstone's owner is a pseudonym (memwarden.stores.tombstones): read it as the owner the
    caller may read whose pseudonym it is, so a person still sees that their memory was purged."""
    if record is None or not is_pseudonym(record.owner_id):
        return record
    for clause in rf.clauses:
        for owner in clause.owner_ids or ():
            if state.pseudonyms.subject(rf.tenant_id, owner) == record.owner_id:
                return record.model_copy(update={"owner_id": owner})
    return record


@router.get("/{memory_id}", response_model=MemoryDetail)
async def get_memory(state: State, caller: Caller, memory_id: str) -> MemoryDetail:
    rf = _readable(caller, tuple(Status))
    record = _unmasked(state, rf, await state.store.get_memory(caller.tenant, memory_id))
    hidden = caller.role is Role.AGENT and not await memory_enabled(state, caller)
    if record is None or hidden or not rf.admits(record):
        raise Problem(404, "not_found", "no such memory", field="memory_id")
    history: list[MemoryOut] = []
    seen = {record.id}
    previous = record.supersedes
    while previous and previous not in seen:
        seen.add(previous)
        older = _unmasked(state, rf, await state.store.get_memory(caller.tenant, previous))
        if older is None or not rf.admits(older):
            break
        history.append(MemoryOut.of(older))
        previous = older.supersedes
    return MemoryDetail(**MemoryOut.of(record).model_dump(), history=history)


async def _settle(state: ApiState, caller: Caller, memory_id: str, action: SettleAction) -> RememberOut:
    """Confirm or decline a PENDING write through its PendingWriteWorkflow, answered in one round trip.

    The update id is the action, so repeating a confirm returns the first confirm's answer even after the
    workflow closed; a confirm after a decline or after the window passed is 409.
    """
    record = await state.store.get_memory(caller.tenant, memory_id)
    visible = record is not None and (
        may_settle(caller, record)
        or (
            caller.role in (Role.USER, Role.AGENT)
            and read_filter(caller).model_copy(update={"statuses": tuple(Status)}).admits(record)
        )
    )
    if record is None or not visible:
        raise Problem(404, "not_found", "no such memory", field="memory_id")
    if not may_settle(caller, record):
        raise Problem(403, "not_confirmer", "only the owner (or the shared store's moderator) settles this write")
    if record.scope is Scope.SHARED and record.provenance.writer == caller.actor:
        # Review means a second pair of eyes: a moderator who proposed the write may not settle it.
        raise Problem(403, "own_write", "a moderator may not settle their own write", field="memory_id")
    workflow_id = pending_workflow_id(memory_id)
    handle = state.temporal.get_workflow_handle(workflow_id, result_type=RememberResult)
    try:
        result = await handle.execute_update(
            PendingWriteWorkflow.settle,
            SettleRequest(action=action, actor=_pseudonym(state, caller)),
            id=f"settle-{action.value}",
        )
    except (WorkflowUpdateFailedError, RPCError):
        raise Problem(
            409,
            "not_pending",
            "this write is no longer pending (settled, declined or its window passed)",
            field="memory_id",
            extra={"memory_status": record.status.value},
        ) from None
    return RememberOut(**result.model_dump(), workflow_id=workflow_id)


@router.post("/{memory_id}/confirm", response_model=RememberOut)
async def confirm(state: State, caller: Caller, memory_id: str) -> RememberOut:
    return await _settle(state, caller, memory_id, SettleAction.CONFIRM)


@router.post("/{memory_id}/decline", response_model=RememberOut)
async def decline(state: State, caller: Caller, memory_id: str) -> RememberOut:
    return await _settle(state, caller, memory_id, SettleAction.DECLINE)
