"""Handing a conversation to memwarden: park it, and get the ConversationWorkflow input that names it.

Why a service: both `POST /v1/conversations` and a bulk importer hand over conversations, and both must
park the messages (a claim check: the text never enters workflow history) and the subject handle (the
owner's id and the writer, out of history too) in one durable transaction before the workflow starts,
and must derive the same ids, so that sending a conversation twice, by either path, stores nothing twice.

`park_conversation` does that and returns a `ConversationInput`; `conversation_workflow_id` names the
workflow for it. The caller starts `ConversationWorkflow` (as a workflow or as a child) with that input
and the gate's policy.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memwarden.extract.base import Message
from memwarden.records import ConversationInput, Scope
from memwarden.stores.sql import SqlStore
from memwarden.stores.subjects import handle_row, new_handle

CONVERSATION_NS = uuid.UUID("4c7d9e21-6b3a-4f0e-a1d8-5e2b7c9f0a13")
CLAIM_CHECK_TTL = timedelta(days=1)
"""As for a single write: what no workflow came back for is swept after a day."""
CONVERSATION_REF_PREFIX = "conversation-"


@dataclass(frozen=True)
class ConversationTarget:
    """Where the conversation's memories go and who hands it over, as `identity.write_target` decided."""

    tenant_id: str
    owner_id: str
    scope: Scope
    agent_id: str | None
    store: str | None
    writer: str
    """The caller as `role:sub` (the token's, never the body's)."""
    actor: str
    """The caller as the audit log names it (a pseudonym)."""


def _turn_key(key: bytes, tenant_id: str, message: Message) -> str:
    """A turn's identity within its session: the caller's turn id, else a keyed hash of what was said and when.

    Keyed, because it is folded into memory ids the caller sees: a plain hash of a short text could be
    recovered by trying every value."""
    if message.turn_id is not None:
        basis = f"id\x00{message.turn_id}"
    else:
        ts = message.timestamp.isoformat() if message.timestamp else ""
        basis = f"text\x00{message.role.value}\x00{ts}\x00{message.content}"
    return hmac.new(key, f"{tenant_id}\x00{basis}".encode(), hashlib.sha256).hexdigest()[:32]


def namespace_key(target: ConversationTarget, session_id: str) -> str:
    """Fixed by (tenant, caller, session): every memory id of the session is derived from it."""
    return str(uuid.uuid5(CONVERSATION_NS, f"{target.tenant_id}\x00{target.writer}\x00{session_id}"))


def conversation_workflow_id(request: ConversationInput) -> str:
    """The same conversation (same session, same turns) is the same workflow: a resend joins the first run."""
    return f"conversation-{request.conversation_ref.removeprefix(CONVERSATION_REF_PREFIX)}"


async def park_conversation(
    store: SqlStore,
    handle_key: bytes,
    target: ConversationTarget,
    session_id: str,
    messages: Sequence[Message],
    *,
    received_at: datetime | None = None,
    concurrency: int = 1,
) -> ConversationInput:
    """Park the messages and the subject handle in one transaction; return the workflow's sealed input.

    The conversation's claim-check ref is a function of the namespace and its turns, so parking the same
    conversation again replaces the same row and names the same workflow."""
    at = received_at or datetime.now(UTC)
    ns = namespace_key(target, session_id)
    turns = [_turn_key(handle_key, target.tenant_id, m) for m in messages]
    digest = hashlib.sha256("\x00".join([ns, *turns]).encode()).hexdigest()[:40]
    ref = f"{CONVERSATION_REF_PREFIX}{digest}"
    session_key = hmac.new(handle_key, f"{target.tenant_id}\x00session\x00{session_id}".encode(), "sha256")
    body = {
        "session_id": session_id,
        "received_at": at.isoformat(),
        "messages": [
            {**m.model_dump(mode="json", exclude_none=True), "turn_key": key}
            for m, key in zip(messages, turns, strict=True)
        ],
    }
    handle = new_handle(handle_key, target.tenant_id, target.owner_id)
    expires = at + CLAIM_CHECK_TTL
    await store.put_candidates(
        [
            (ref, target.tenant_id, json.dumps(body, separators=(",", ":")), expires),
            handle_row(handle, target.tenant_id, {"owner_id": target.owner_id, "writer": target.writer}, expires),
        ]
    )
    return ConversationInput(
        conversation_ref=ref,
        namespace_key=ns,
        session_key=session_key.hexdigest()[:32],
        message_count=len(messages),
        tenant_id=target.tenant_id,
        scope=target.scope,
        agent_id=target.agent_id,
        store=target.store,
        actor=target.actor,
        subject_ref=handle,
        concurrency=concurrency,
    )
