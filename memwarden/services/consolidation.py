"""Consolidating a session, the service step: its near-duplicate episodes -> the session's summary.

Why its own module: it is the one step of a conversation that reads memories back (the session's live
episodes, by embedding) rather than what was parked, and it writes a derived record with lineage and
its audit event, as `summaries.SummaryService` does for an owner. `ConversationService.consolidate`
calls it; nothing here knows Temporal.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime

from memwarden.policy.dedupe import cosine
from memwarden.records import ConsolidateInput, ConsolidateResult, MemoryRecord, Scope, namespace_label
from memwarden.services.deps import Deps
from memwarden.services.run import Run
from memwarden.stores.audit import AuditEventIn
from memwarden.stores.cache import invalidation_prefixes
from memwarden.stores.conversations import session_episodes
from memwarden.stores.subjects import resolve_handle
from memwarden.stores.summaries import derive

CONSOLIDATION_THRESHOLD = 0.55
"""Cosine (all-MiniLM-L6-v2) at which two episodes of one session tell of the same event. What the gate let
through is below its dedupe threshold (0.73) or differs in a value; two tellings of one event measured
0.60-0.69 here, unrelated episodes of one chat 0.15-0.26."""
SESSION_SUMMARY_PREFIX = "summary.session."


def session_summary_slot(session_key: str) -> str:
    """A session's summary has its own slot: re-deriving it never supersedes the owner's summary."""
    return f"{SESSION_SUMMARY_PREFIX}{session_key[:16]}"


def clustered(vectors: list[list[float]], threshold: float = CONSOLIDATION_THRESHOLD) -> list[int]:
    """The indexes of every vector within `threshold` of another one, in order."""
    found: set[int] = set()
    for i in range(len(vectors)):
        for j in range(i + 1, len(vectors)):
            if cosine(vectors[i], vectors[j]) >= threshold:
                found.update((i, j))
    return sorted(found)


async def consolidate_session(deps: Deps, request: ConsolidateInput, run: Run) -> ConsolidateResult:
    """Near-duplicate episodes of one session -> the session's summary, with `derived_from` lineage.

    Idempotent: the summary's id is a function of its sources and slot, and its audit event's id of the
    summary. Forget re-derives it from what remains (memwarden.sinks.SummarySink), in the same slot. A gone
    handle or parked conversation (a finished run's retry) consolidates nothing."""
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
    sources = [episodes[i] for i in clustered(vectors)]
    if not sources:
        return ConsolidateResult()
    now = deps.clock()
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
        now=now,
        slot=session_summary_slot(request.session_key),
    )
    if record is None:
        return ConsolidateResult()
    await deps.store.append_audit(_event(record, request.actor, len(sources), run, now))
    for prefix in invalidation_prefixes(record.tenant_id, Scope.USER, record.owner_id):
        await deps.cache.delete_prefix(prefix)
    return ConsolidateResult(summary_id=record.id, derived_from=len(sources))


def _event(record: MemoryRecord, actor: str, derived_from: int, run: Run, at: datetime) -> AuditEventIn:
    """Keyed by the summary (a retry, or a resend that derives the same summary, appends nothing twice),
    naming the workflow that consolidated it."""
    return AuditEventIn(
        id=f"summary-{record.id}",
        at=at,
        tenant_id=record.tenant_id,
        actor=actor,
        operation="summarize",
        memory_id=record.id,
        namespace=namespace_label(record),
        reason="session_consolidated",
        workflow_id=run.workflow_id,
        details={"content_hash": record.content_hash, "derived_from": derived_from},
    )
