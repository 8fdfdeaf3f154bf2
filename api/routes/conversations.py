"""`/v1/conversations`: hand over a conversation; memwarden extracts what is worth remembering and the gate
decides each candidate (ConversationWorkflow). Thin: the body is checked here, the rest is the service's
(memwarden.services.conversations) and the workflow's."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import uuid
from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Body
from fastapi.responses import JSONResponse
from temporalio.client import WorkflowExecutionStatus, WorkflowFailureError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from api.prescreen import withheld_reason
from api.problems import Problem
from api.schemas import ConversationCandidateOut, ConversationIn, ConversationOut
from api.state import ApiState, Caller, State
from api.telemetry import traced
from memwarden.extract.base import SOURCE_OF_ROLE, Message
from memwarden.identity import Forbidden, Principal, Role, write_target
from memwarden.records import ConversationInput, ConversationResult, Decision, SourceKind, namespace_label
from memwarden.services.conversations import (
    ConversationTarget,
    conversation_workflow_id,
    namespace_key,
    park_conversation,
)
from memwarden.stores.audit import AuditEventIn
from memwarden.telemetry import REMEMBER_CONVERSATION
from workflows.conversation import ConversationWorkflow

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])

_WITHHELD_NS = uuid.UUID("3e9b6a2c-51d4-4f7e-9c08-7a1d2e5b4f60")


def _check(state: ApiState, body: ConversationIn) -> None:
    settings = state.settings
    if len(body.messages) > settings.max_conversation_messages:
        raise Problem(
            413,
            "conversation_too_large",
            f"a conversation holds at most {settings.max_conversation_messages} messages",
            field="messages",
        )
    for i, message in enumerate(body.messages):
        if len(message.content) > settings.max_content_chars:
            raise Problem(
                413,
                "content_too_large",
                f"a message exceeds {settings.max_content_chars} characters",
                field=f"messages.{i}.content",
            )
        if not message.content.strip():
            raise Problem(422, "validation_failed", "a message is blank", field=f"messages.{i}.content")
        if message.timestamp is not None and message.timestamp.tzinfo is None:
            raise Problem(422, "validation_failed", "a timestamp needs a zone", field=f"messages.{i}.timestamp")
    if not body.session_id.strip():
        raise Problem(422, "validation_failed", "session_id is blank", field="session_id")


def admit_conversation(state: ApiState, caller: Principal, body: ConversationIn) -> ConversationTarget:
    """The checks the schema cannot make (message count and sizes, blank text, zoned timestamps) and where
    this caller's conversation goes (`identity.write_target`, as for a single write); a Problem naming the
    field otherwise. A bulk import's conversation line is admitted by this very function."""
    if caller.role not in (Role.USER, Role.AGENT):
        raise Problem(403, "role_cannot_write", f"role {caller.role.value} may not hand over conversations")
    _check(state, body)
    try:
        target = write_target(caller, scope=body.scope, owner_id=body.owner_id, store=body.store)
    except Forbidden as exc:
        raise Problem(403, exc.reason, f"this principal may not write there ({exc.reason})", field="scope") from None
    return ConversationTarget(
        tenant_id=target.tenant_id,
        owner_id=target.owner_id,
        scope=target.scope,
        agent_id=target.agent_id,
        store=target.store,
        writer=caller.actor,
        actor=state.pseudonyms.actor(target.tenant_id, caller.actor),
    )


@router.post("", response_model=ConversationOut, status_code=200)
@traced(REMEMBER_CONVERSATION)
async def remember_conversation(
    state: State, caller: Caller, body: Annotated[ConversationIn, Body()]
) -> ConversationOut | JSONResponse:
    target = admit_conversation(state, caller, body)
    messages = [Message.model_validate(m.model_dump()) for m in body.messages]
    withheld = await withhold(state, target, body.session_id, messages)
    kept = [i for i in range(len(messages)) if i not in withheld]
    refused = [
        ConversationCandidateOut(
            message_index=i, turn_id=messages[i].turn_id, kind="message", decision=Decision.REJECT, reason=reason
        )
        for i, reason in sorted(withheld.items())
    ]
    if not kept:
        return ConversationOut(workflow_id="", status="done", candidates=refused)
    messages = [messages[i] for i in kept]
    request = await park_conversation(
        state.store,
        state.handle_key,
        target,
        body.session_id,
        messages,
        received_at=datetime.now(UTC),
        concurrency=state.settings.conversation_concurrency,
    )
    workflow_id = conversation_workflow_id(request)
    result = await _run(state, request, workflow_id)
    if result is None:
        return JSONResponse(
            status_code=202, content=ConversationOut(workflow_id=workflow_id, status="running").model_dump()
        )
    extracted = [
        ConversationCandidateOut(**{**o.model_dump(), "message_index": kept[o.message_index]}) for o in result.outcomes
    ]
    return ConversationOut(
        workflow_id=workflow_id,
        status="done",
        extractor=result.extractor,
        candidates=sorted([*refused, *extracted], key=lambda c: c.message_index),
        summary_id=result.summary_id,
    )


async def withhold(
    state: ApiState, target: ConversationTarget, session_id: str, messages: list[Message]
) -> dict[int, str]:
    """Messages the gate would reject whatever was extracted from them (a secret): never parked, so their
    text never reaches the database or its WAL; each is refused here, with one audit event per message."""
    withheld: dict[int, str] = {}
    for i, m in enumerate(messages):
        reason = await withheld_reason(m.content, SOURCE_OF_ROLE.get(m.role, SourceKind.USER).value)
        if reason is not None:
            withheld[i] = reason
    ns = namespace_key(target, session_id)
    for i, reason in withheld.items():
        said = hmac.new(state.handle_key, messages[i].content.encode(), hashlib.sha256).hexdigest()
        await state.store.append_audit(
            AuditEventIn(
                id=f"deny-{uuid.uuid5(_WITHHELD_NS, f'{ns}/{i}/{said}')}",
                tenant_id=target.tenant_id,
                actor=target.actor,
                operation="deny",
                memory_id=None,
                namespace=namespace_label(target),
                reason=reason,
                details={"decision": Decision.REJECT.value, "screened_by": "api", "conversation_message": i},
            )
        )
    return withheld


async def _run(state: ApiState, request: ConversationInput, workflow_id: str) -> ConversationResult | None:
    """Start (or join) the conversation's workflow and wait for its answer; None when it outlasts the wait.

    The same conversation is the same workflow id: a resend joins the run in flight or gets the closed run's
    answer (a failed run may be retried). What the resend parked is dropped again when the first run no
    longer needs it."""
    settings = state.settings
    try:
        handle = await state.temporal.start_workflow(
            ConversationWorkflow.run,
            args=[request, settings.gate_policy],
            id=workflow_id,
            task_queue=settings.temporal_task_queue,
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
            id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
            result_type=ConversationResult,
        )
    except WorkflowAlreadyStartedError:
        handle = state.temporal.get_workflow_handle(workflow_id, result_type=ConversationResult)
        described = await handle.describe()
        if described.status is not WorkflowExecutionStatus.RUNNING:
            await state.store.delete_candidate(request.conversation_ref)
        await state.store.delete_candidate(request.subject_ref)
    try:
        async with asyncio.timeout(settings.workflow_timeout_seconds):
            return await handle.result()
    except TimeoutError:
        return None
    except WorkflowFailureError:
        raise Problem(
            503,
            "conversation_failed",
            "the conversation could not be processed; send it again",
            extra={"workflow_id": workflow_id},
        ) from None
