"""Handing a conversation to memwarden: park it, and get the ConversationWorkflow input that names it.

Why a service: both `POST /v1/conversations` and a bulk importer hand over conversations, and both must
park the messages (a claim check: the text never enters workflow history) and the subject handle (the
owner's id and the writer, out of history too) in one durable transaction before the workflow starts,
and must derive the same ids, so that sending a conversation twice, by either path, stores nothing twice.

`park_conversation` does that and returns a `ConversationInput`; `conversation_workflow_id` names the
workflow for it. The caller starts `ConversationWorkflow` (as a workflow or as a child) with that input
and the gate's policy.

`ConversationService` is what that workflow's activities do (`activities.conversation` adapts it):
`extract` is the only place the conversation's text is read. It runs the configured extractor, adds the
durable preference that task guidance repeated across sessions suggests, derives each candidate's memory
id from (session, turn, index), parks each new candidate's content as a claim check (as the API does for
a single write) and returns sealed `RememberInput`s: ids, codes and hashes, never text. Candidates whose
memory already exists (an earlier send of the same turns) come back with that row's answer and are not
proposed again. Idempotent: the same parked conversation gives the same ids and the same parked rows.
`consolidate` (`memwarden.services.consolidation`) turns the session's near-duplicate episodes into its
summary; `release` drops the parked messages.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel

from memwarden.errors import CandidateGone
from memwarden.extract.base import Extractor, Kind, Lifetime, Message, Proposal
from memwarden.extract.llm import LlmExtractor
from memwarden.extract.rules import TASK_SCOPE_PHRASE, RuleExtractor
from memwarden.records import (
    ConsolidateInput,
    ConsolidateResult,
    ConversationInput,
    Decision,
    ExtractedCandidate,
    Extraction,
    MemoryRecord,
    MemoryType,
    Provenance,
    RememberInput,
    RememberResult,
    Scope,
    SourceKind,
    Status,
    WriteReason,
    content_hash,
)
from memwarden.services.consolidation import consolidate_session
from memwarden.services.deps import Deps
from memwarden.services.run import Run
from memwarden.stores.conversations import guidance_sessions, guidance_slot
from memwarden.stores.sql import SqlStore
from memwarden.stores.subjects import handle_row, new_handle, resolve_handle

CONVERSATION_NS = uuid.UUID("4c7d9e21-6b3a-4f0e-a1d8-5e2b7c9f0a13")
CANDIDATE_NS = uuid.UUID("d2a6f3b8-7c41-4e95-8b0d-1f6e3a9c5b27")
CLAIM_CHECK_TTL = timedelta(days=1)
"""As for a single write: what no workflow came back for is swept after a day (the conversation and each
candidate's content alike)."""
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
    parked_at: datetime | None = None,
    concurrency: int = 1,
) -> ConversationInput:
    """Park the messages and the subject handle in one transaction; return the workflow's sealed input.

    The conversation's claim-check ref is a function of the namespace and its turns, so parking the same
    conversation again replaces the same row and names the same workflow. `received_at` (default now) dates
    what the messages say ("tomorrow"); the claim checks expire a day after `parked_at` (default
    `received_at`), so a conversation a bulk import received days before its turn is still dated by its
    arrival and still parked when its workflow runs."""
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
    expires = (parked_at or at) + CLAIM_CHECK_TTL
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


class ImportedConversation(BaseModel):
    """A conversation line of a bulk import as the API parks it (`import_lines`, the import's claim check)
    until the import reaches it: what `park_conversation` needs then, decided as `POST /v1/conversations`
    decides it (the write target, the messages withheld for a secret). No TTL: the import may wait for days,
    and an erasure of the owner drops the line with its others."""

    session_id: str
    received_at: datetime
    messages: list[Message]
    """The messages parked, those withheld left out (so the ids are the route's for the same messages)."""
    kept: list[int]
    """Each parked message's index in the line."""
    withheld: dict[int, str]
    """Message index in the line -> why it was not parked (its `deny` event was recorded by the API)."""
    target: ConversationTarget
    concurrency: int = 1

    async def park(self, store: SqlStore, handle_key: bytes, *, parked_at: datetime) -> ConversationInput:
        """Hand it over as the route does (`park_conversation`): the same ref, workflow id and memory ids."""
        return await park_conversation(
            store,
            handle_key,
            self.target,
            self.session_id,
            self.messages,
            received_at=self.received_at,
            parked_at=parked_at,
            concurrency=self.concurrency,
        )


def make_extractor(deps: Deps) -> Extractor:
    """The configured extractor (`MEMWARDEN_EXTRACTOR`): rules by default, a chat-completions endpoint if set."""
    settings = deps.settings
    if settings.extractor == "llm":
        return LlmExtractor.from_settings(settings)
    return RuleExtractor()


def candidate_memory_id(namespace_key: str, turn_key: str, index: int) -> str:
    """The same turn of the same session names the same memories: a resend stores nothing twice."""
    return str(uuid.uuid5(CANDIDATE_NS, f"{namespace_key}\x00{turn_key}\x00{index}"))


def known_result(row: MemoryRecord) -> RememberResult:
    """The answer an earlier send got, read back from the row it left."""
    if row.status is Status.PENDING:
        return RememberResult(decision=Decision.PENDING, reason="replayed", memory_id=row.id)
    decision = Decision.UPDATE if row.supersedes else Decision.ADD
    return RememberResult(decision=decision, reason="replayed", memory_id=row.id, supersedes=row.supersedes)


def durable_form(text: str) -> str:
    """Task guidance without the words that scoped it to one task ("For this ticket, keep it short" -> "Keep it
    short"): the text of the durable preference its repeats suggest."""
    stripped = TASK_SCOPE_PHRASE.sub("", text).strip(" ,;:-")
    stripped = stripped[0].upper() + stripped[1:] if stripped else text
    return stripped if stripped.endswith((".", "!")) else stripped + "."


@dataclass(frozen=True)
class ParkedConversation:
    """What `park_conversation` parked, read back: the caller's session id, when it arrived, the turns."""

    session_id: str
    received_at: datetime
    messages: list[Message]
    turn_keys: list[str]


@dataclass(frozen=True)
class Proposed:
    """The extractor's proposals for a parked conversation (repeats of task guidance included)."""

    owner_id: str
    conversation: ParkedConversation
    proposals: list[Proposal]


class ConversationService:
    """Bound to one worker's Deps and its extractor (the configured one unless a caller hands its own)."""

    def __init__(self, deps: Deps, extractor: Extractor | None = None) -> None:
        self.deps = deps
        self.extractor = extractor or make_extractor(deps)

    async def parked(self, ref: str) -> ParkedConversation:
        """The parked conversation; `CandidateGone` once it was released or swept."""
        raw = await self.deps.store.get_candidate(ref)
        if raw is None:
            raise CandidateGone(ref)
        body = json.loads(raw)
        messages, turns = [], []
        for item in body["messages"]:
            turns.append(str(item.pop("turn_key")))
            messages.append(Message.model_validate(item))
        return ParkedConversation(str(body["session_id"]), datetime.fromisoformat(body["received_at"]), messages, turns)

    async def propose(self, request: ConversationInput) -> Proposed:
        """What the extractor proposes for the parked conversation, dated by when it arrived.

        A gone subject handle (expired, or the owner erased meanwhile: no one left to remember for) drops
        the parked conversation and raises `CandidateGone`."""
        store = self.deps.store
        ids = await resolve_handle(store, request.subject_ref)
        if ids is None:
            await store.delete_candidate(request.conversation_ref)
            raise CandidateGone(request.subject_ref)
        owner_id = str(ids["owner_id"])
        conversation = await self.parked(request.conversation_ref)
        proposals = await self.extractor.extract(conversation.messages, conversation.received_at)
        return Proposed(owner_id, conversation, await self._with_repeats(request, owner_id, proposals))

    async def extract(self, request: ConversationInput) -> Extraction:
        """The sealed candidates of the parked conversation, each new one's content parked (see the module)."""
        proposed = await self.propose(request)
        messages, turns = proposed.conversation.messages, proposed.conversation.turn_keys
        max_chars = self.deps.settings.max_content_chars
        per_turn: dict[int, int] = {}
        staged: list[tuple[ExtractedCandidate, str]] = []
        for p in proposed.proposals:
            if not 0 <= p.message_index < len(messages) or len(p.content) > max_chars:
                continue  # an extractor's slip (a model's): nothing from outside the conversation is proposed
            index = per_turn.get(p.message_index, 0)
            per_turn[p.message_index] = index + 1
            memory_id = candidate_memory_id(request.namespace_key, turns[p.message_index], index)
            staged.append((self._sealed(request, proposed.conversation, p, memory_id), p.content))
        store = self.deps.store
        existing = await store.get_many(request.tenant_id, [c.candidate.memory_id for c, _ in staged])
        expires = self.deps.clock() + CLAIM_CHECK_TTL
        rows = []
        out: list[ExtractedCandidate] = []
        for c, text in staged:
            row = existing.get(c.candidate.memory_id)
            if row is not None:
                out.append(c.model_copy(update={"known": known_result(row)}))
                continue
            rows.append((c.candidate.candidate_ref, request.tenant_id, text, expires))
            out.append(c)
        if rows:
            await store.put_candidates(rows)
        return Extraction(candidates=out, extractor=self.extractor.name)

    def _sealed(
        self, request: ConversationInput, conversation: ParkedConversation, p: Proposal, memory_id: str
    ) -> ExtractedCandidate:
        """The proposal as RememberWorkflow's input: ids, codes and hashes (its content parked under its id)."""
        message = conversation.messages[p.message_index]
        slot = p.slot
        if p.kind is Kind.TASK_GUIDANCE and p.guidance_key:
            slot = guidance_slot(p.guidance_key, request.session_key)
        candidate = RememberInput(
            memory_id=memory_id,
            candidate_ref=memory_id,
            content_hash=content_hash(p.content),
            content_chars=len(p.content),
            tenant_id=request.tenant_id,
            owner_id="",
            scope=request.scope,
            agent_id=request.agent_id,
            store=request.store,
            type=p.type,
            slot=slot,
            source_kind=p.source_kind,
            source_ref=None,
            provenance=Provenance(
                session=conversation.session_id[:128], turn=(message.turn_id or str(p.message_index))[:128]
            ),
            reason=p.reason.value,
            importance=p.importance,
            sensitivity=p.sensitivity,
            ttl_seconds=p.ttl_seconds,
            actor=request.actor,
            confirm_requested=p.confirm_requested,
            subject_ref=request.subject_ref,
        )
        return ExtractedCandidate(
            candidate=candidate,
            message_index=p.message_index,
            turn_id=message.turn_id,
            extractor=self.extractor.name,
            kind=p.kind.value,
        )

    async def _with_repeats(
        self, request: ConversationInput, owner_id: str, proposals: list[Proposal]
    ) -> list[Proposal]:
        """Task guidance the person already gave in enough other sessions also comes as a durable preference,
        filed by the service (`app`, so the gate stages it for the person to confirm)."""
        needed = self.deps.settings.guidance_repeat_sessions
        out: list[Proposal] = []
        asked: set[str] = set()
        for p in proposals:
            out.append(p)
            key = p.guidance_key
            if p.kind is not Kind.TASK_GUIDANCE or not key or key == "general" or key in asked:
                continue
            asked.add(key)
            sessions = await guidance_sessions(
                self.deps.store, request.tenant_id, owner_id, request.scope, request.agent_id, request.store, key
            )
            sessions.add(request.session_key[:16])
            if len(sessions) >= needed:
                out.append(
                    p.model_copy(
                        update={
                            "content": durable_form(p.content),
                            "type": MemoryType.PREFERENCE,
                            "lifetime": Lifetime.DURABLE,
                            "kind": Kind.REPEATED_GUIDANCE,
                            "source_kind": SourceKind.APP,
                            "reason": WriteReason.APP_OBSERVATION,
                            "slot": f"pref.{key}",
                            "ttl_seconds": None,
                            "guidance_key": None,
                        }
                    )
                )
        return out

    async def consolidate(self, request: ConsolidateInput, run: Run) -> ConsolidateResult:
        """The session's near-duplicate episodes -> its summary (`consolidation.consolidate_session`)."""
        return await consolidate_session(self.deps, request, run)

    async def release(self, ref: str) -> None:
        """The conversation's text leaves the store once every candidate was decided (idempotent)."""
        await self.deps.store.delete_candidate(ref)
