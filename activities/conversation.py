"""ConversationWorkflow's activities: extract candidates from a parked conversation, consolidate a session's
near-duplicate episodes, and drop the parked conversation.

`extract_conversation` is the only place the conversation's text is read. It runs the configured extractor,
adds the durable preference that task guidance repeated across sessions suggests, derives each candidate's
memory id from (session, turn, index), parks each new candidate's content as a claim check (as the API does
for a single write) and returns sealed `RememberInput`s: ids, codes and hashes, never text. Candidates whose
memory already exists (an earlier send of the same turns) come back with that row's answer and are not
proposed again. Idempotent: the same parked conversation gives the same ids and the same parked rows.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta

from temporalio import activity
from temporalio.exceptions import ApplicationError

from memwarden.errors import CandidateGone
from memwarden.extract.base import Extractor, Kind, Lifetime, Message, Proposal
from memwarden.extract.llm import LlmExtractor
from memwarden.extract.rules import TASK_SCOPE_PHRASE, RuleExtractor
from memwarden.policy.dedupe import cosine
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
    namespace_label,
)
from memwarden.services.deps import Deps
from memwarden.stores.audit import AuditEventIn
from memwarden.stores.cache import invalidation_prefixes
from memwarden.stores.conversations import guidance_sessions, guidance_slot, session_episodes
from memwarden.stores.subjects import resolve_handle
from memwarden.stores.summaries import derive
from memwarden.temporal.names import CONSOLIDATE_SESSION, EXTRACT_CONVERSATION, RELEASE_CONVERSATION

CANDIDATE_NS = uuid.UUID("d2a6f3b8-7c41-4e95-8b0d-1f6e3a9c5b27")
CLAIM_CHECK_TTL = timedelta(days=1)
CONSOLIDATION_THRESHOLD = 0.55
"""Cosine (all-MiniLM-L6-v2) at which two episodes of one session tell of the same event. What the gate let
through is below its dedupe threshold (0.74) or differs in a value; two tellings of one event measured
0.60-0.69 here, unrelated episodes of one chat 0.15-0.26."""
SESSION_SUMMARY_PREFIX = "summary.session."


def make_extractor(deps: Deps) -> Extractor:
    """The configured extractor (`MEMWARDEN_EXTRACTOR`): rules by default, a chat-completions endpoint if set."""
    settings = deps.settings
    if settings.extractor == "llm":
        return LlmExtractor.from_settings(settings)
    return RuleExtractor()


def gone(ref: str) -> ApplicationError:
    err = CandidateGone(ref)
    return ApplicationError(str(err), type=type(err).__name__, non_retryable=True)


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


class ConversationActivities:
    def __init__(self, deps: Deps, extractor: Extractor | None = None) -> None:
        self.deps = deps
        self.extractor = extractor or make_extractor(deps)

    async def _conversation(self, ref: str) -> tuple[str, datetime, list[Message], list[str]]:
        raw = await self.deps.store.get_candidate(ref)
        if raw is None:
            raise gone(ref)
        body = json.loads(raw)
        messages, turns = [], []
        for item in body["messages"]:
            turns.append(str(item.pop("turn_key")))
            messages.append(Message.model_validate(item))
        return str(body["session_id"]), datetime.fromisoformat(body["received_at"]), messages, turns

    @activity.defn(name=EXTRACT_CONVERSATION)
    async def extract_conversation(self, request: ConversationInput) -> Extraction:
        store = self.deps.store
        ids = await resolve_handle(store, request.subject_ref)
        if ids is None:  # expired, or the owner was erased meanwhile: no one left to remember for
            await store.delete_candidate(request.conversation_ref)
            raise gone(request.subject_ref)
        owner_id = str(ids["owner_id"])
        session_id, received_at, messages, turns = await self._conversation(request.conversation_ref)
        proposals = await self.extractor.extract(messages, received_at)
        proposals = await self._with_repeats(request, owner_id, proposals)
        max_chars = self.deps.settings.max_content_chars
        per_turn: dict[int, int] = {}
        staged: list[tuple[ExtractedCandidate, str]] = []
        for p in proposals:
            if not 0 <= p.message_index < len(messages) or len(p.content) > max_chars:
                continue  # an extractor's slip (a model's): nothing from outside the conversation is proposed
            index = per_turn.get(p.message_index, 0)
            per_turn[p.message_index] = index + 1
            message = messages[p.message_index]
            memory_id = candidate_memory_id(request.namespace_key, turns[p.message_index], index)
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
                provenance=Provenance(session=session_id[:128], turn=(message.turn_id or str(p.message_index))[:128]),
                reason=p.reason.value,
                importance=p.importance,
                sensitivity=p.sensitivity,
                ttl_seconds=p.ttl_seconds,
                actor=request.actor,
                confirm_requested=p.confirm_requested,
                subject_ref=request.subject_ref,
            )
            staged.append(
                (
                    ExtractedCandidate(
                        candidate=candidate,
                        message_index=p.message_index,
                        turn_id=message.turn_id,
                        extractor=self.extractor.name,
                        kind=p.kind.value,
                    ),
                    p.content,
                )
            )
        existing = await store.get_many(request.tenant_id, [c.candidate.memory_id for c, _ in staged])
        expires = datetime.now(UTC) + CLAIM_CHECK_TTL
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

    @activity.defn(name=CONSOLIDATE_SESSION)
    async def consolidate_session(self, request: ConsolidateInput) -> ConsolidateResult:
        """Near-duplicate episodes of one session -> the session's summary, with `derived_from` lineage.

        Idempotent: the summary's id is a function of its sources and slot. Forget re-derives it from what
        remains (memwarden.sinks.SummarySink), in the same slot."""
        deps = self.deps
        ids = await resolve_handle(deps.store, request.subject_ref)
        raw = await deps.store.get_candidate(request.conversation_ref)
        if ids is None or raw is None:
            return ConsolidateResult()
        owner_id = str(ids["owner_id"])
        session_id = str(json.loads(raw)["session_id"])
        episodes = await session_episodes(deps.store, request.tenant_id, owner_id, session_id)
        if len(episodes) < 2 or not set(request.memory_ids) & {e.id for e in episodes}:
            return ConsolidateResult()
        vectors = await asyncio.to_thread(deps.embedder.embed, [e.content or "" for e in episodes])
        clustered: set[int] = set()
        for i in range(len(episodes)):
            for j in range(i + 1, len(episodes)):
                if cosine(vectors[i], vectors[j]) >= CONSOLIDATION_THRESHOLD:
                    clustered.update((i, j))
        if not clustered:
            return ConsolidateResult()
        sources = [episodes[i] for i in sorted(clustered)]
        record = await derive(
            deps.store,
            deps.index,
            deps.embedder,
            deps.summarizer,
            tenant_id=request.tenant_id,
            owner_id=owner_id,
            sources=sources,
            max_chars=deps.settings.max_content_chars,
            actor=request.actor,
            slot=f"{SESSION_SUMMARY_PREFIX}{request.session_key[:16]}",
        )
        if record is None:
            return ConsolidateResult()
        await deps.store.append_audit(
            AuditEventIn(
                id=f"summary-{record.id}",
                tenant_id=record.tenant_id,
                actor=request.actor,
                operation="summarize",
                memory_id=record.id,
                namespace=namespace_label(record),
                reason="session_consolidated",
                workflow_id=activity.info().workflow_id,
                details={"content_hash": record.content_hash, "derived_from": len(sources)},
            )
        )
        for prefix in invalidation_prefixes(record.tenant_id, Scope.USER, record.owner_id):
            await deps.cache.delete_prefix(prefix)
        return ConsolidateResult(summary_id=record.id, derived_from=len(sources))

    @activity.defn(name=RELEASE_CONVERSATION)
    async def release_conversation(self, ref: str) -> None:
        """The conversation's text leaves the store once every candidate was decided (idempotent)."""
        await self.deps.store.delete_candidate(ref)

    def all(self) -> list[object]:
        return [self.extract_conversation, self.consolidate_session, self.release_conversation]
