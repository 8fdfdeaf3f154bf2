"""`PATCH /v1/memories/{id}`: the owner corrects a memory; the new version supersedes it through the gate.

Why through RememberWorkflow and not an UPDATE of the row: a correction is new content, so the
detectors (secrets, PII, instruction-like text), dedupe and staging must apply to it exactly as to
any proposal, and the old version must stay as `superseded` history (audit, undo). Supersession is
by slot: a memory without one first adopts `edit.<its id>` (`SqlStore.adopt_slot`), then the
correction is proposed into that slot by the owner (source `user`), so the gate's step 6 answers
UPDATE and the commit path marks the old row superseded in the same transaction as the new one.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Body

from api.problems import Problem
from api.routes.memories import _nul_field, _replay, _scoped_key, remember
from api.schemas import MemoryPatchIn, RememberOut
from api.state import ApiState, Caller, State
from api.telemetry import traced
from memwarden.identity import Principal, Role
from memwarden.records import (
    LIVE_STATUSES,
    Decision,
    MemoryRecord,
    MemoryType,
    Provenance,
    RememberInput,
    SourceKind,
    WriteReason,
    content_hash,
    namespace_label,
)
from memwarden.stores.audit import AuditEventIn, Operation
from memwarden.telemetry import UPDATE_MEMORY

router = APIRouter(prefix="/v1/memories", tags=["memories"])

_PATCH_NS = uuid.UUID("2d8f3f0a-96c4-4a5e-bb7e-3f6b0c1d2e47")
USER_REASONS = frozenset(
    {WriteReason.USER_EXPLICIT_PREFERENCE.value, WriteReason.USER_STATED_FACT.value, WriteReason.TASK_OUTCOME.value}
)


def edit_slot(memory_id: str) -> str:
    """The slot a slotless memory adopts when its owner first corrects it."""
    return f"edit.{memory_id}"


def correction_reason(record: MemoryRecord, asked: str | None) -> str:
    """The write reason of a correction: the caller's, else the memory's own if a person may give it."""
    if asked is not None:
        return asked
    if record.reason in USER_REASONS:
        return record.reason
    if record.type is MemoryType.PREFERENCE:
        return WriteReason.USER_EXPLICIT_PREFERENCE.value
    return WriteReason.USER_STATED_FACT.value


async def owned_memory(state: ApiState, caller: Principal, memory_id: str) -> MemoryRecord:
    """The caller's own memory (any scope whose owner is them); anyone else's, or none, is 404."""
    record = await state.store.get_memory(caller.tenant, memory_id) if len(memory_id) <= 256 else None
    if record is None or caller.role is not Role.USER or record.owner_id != caller.sub:
        raise Problem(404, "not_found", "no such memory", field="memory_id")
    return record


@router.patch("/{memory_id}", response_model=RememberOut)
@traced(UPDATE_MEMORY)
async def patch_memory(
    state: State, caller: Caller, memory_id: str, body: Annotated[MemoryPatchIn, Body()]
) -> RememberOut:
    """Correct one's own memory: a new version, gated like any write, supersedes it (the old is kept)."""
    if caller.role is not Role.USER:
        raise Problem(403, "forbidden_role", "only the person a memory is about corrects it (agents propose)")
    settings = state.settings
    if len(body.content) > settings.max_content_chars:
        raise Problem(
            413, "content_too_large", f"content exceeds {settings.max_content_chars} characters", field="content"
        )
    if not body.content.strip():
        raise Problem(422, "validation_failed", "content is blank", field="content")
    nul = _nul_field(body.model_dump(mode="json"))
    if nul is not None:
        raise Problem(422, "validation_failed", "a field contains a NUL character", field=nul)
    record = await owned_memory(state, caller, memory_id)
    if body.expected_version is not None and body.expected_version != record.version:
        raise Problem(
            409,
            "version_conflict",
            "the memory changed since it was read",
            field="expected_version",
            extra={"memory_version": record.version},
        )

    key = f"patch\x00{memory_id}\x00{body.idempotency_key}" if body.idempotency_key else None
    new_id = str(uuid.uuid5(_PATCH_NS, f"{caller.tenant}\x00{caller.actor}\x00{key}")) if key else str(uuid.uuid4())
    workflow_id = f"remember-{new_id}"
    scoped_key = _scoped_key(caller.actor, key)
    digest = content_hash(body.content)
    if scoped_key is not None:
        replay = await _replay(state, workflow_id, scoped_key, caller.tenant, digest)
        if replay is not None:
            return replay
    if record.status not in LIVE_STATUSES:
        raise Problem(
            409,
            "not_live",
            "only a live memory can be corrected (confirm or decline a pending one; past ones are history)",
            field="memory_id",
            extra={"memory_status": record.status.value},
        )

    now = datetime.now(UTC)
    if record.slot is None:
        adopted = await state.store.adopt_slot(caller.tenant, record.id, edit_slot(record.id), now=now)
        if adopted is None or adopted.status not in LIVE_STATUSES:
            raise _gone(adopted)
        record = adopted
    request = RememberInput(
        memory_id=new_id,
        candidate_ref=new_id,
        content_hash=digest,
        content_chars=len(body.content),
        tenant_id=record.tenant_id,
        owner_id=record.owner_id,
        scope=record.scope,
        agent_id=record.agent_id,
        store=record.store,
        type=record.type,
        slot=record.slot,
        source_kind=SourceKind.USER,
        source_ref=None,
        provenance=Provenance(writer=caller.actor),
        reason=correction_reason(record, body.reason),
        importance=body.importance if body.importance is not None else record.importance,
        sensitivity=body.sensitivity or record.sensitivity,
        ttl_seconds=None,
        idempotency_key=scoped_key,
        actor=caller.actor,
    )
    result = await remember(state, request, body.content, now, workflow_id, digest)
    stored = None
    if result.decision in (Decision.ADD, Decision.UPDATE, Decision.PENDING) and result.memory_id == new_id:
        stored = await state.store.get_memory(caller.tenant, new_id)
    await state.store.append_audit(
        AuditEventIn(
            id=f"patch-{new_id}",
            at=now,
            tenant_id=record.tenant_id,
            actor=caller.actor,
            operation=Operation.UPDATE,
            memory_id=record.id,
            namespace=namespace_label(record),
            reason="owner_correction",
            workflow_id=workflow_id,
            hash_before=record.content_hash,
            hash_after=stored.content_hash if stored is not None else None,
            details={
                "decision": result.decision.value,
                "gate_reason": result.reason,
                "new_memory_id": result.memory_id,
                "supersedes": result.supersedes,
            },
        )
    )
    return RememberOut(
        decision=result.decision,
        reason=result.reason,
        memory_id=result.memory_id,
        supersedes=result.supersedes,
        workflow_id=workflow_id,
    )


def _gone(record: MemoryRecord | None) -> Problem:
    status = record.status.value if record is not None else "absent"
    return Problem(409, "not_live", "the memory changed while it was being corrected", extra={"memory_status": status})
