"""ConversationService without Temporal: extraction and consolidation on real stores, the clock and run the test's.

The clock stands still at an instant after the wall clock (the stores still judge a claim check's expiry
by the system clock, so a clock in the past would see its own parked rows as expired) and far from it, so
a time taken from the system instead of the clock shows.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

from memwarden.errors import CandidateGone
from memwarden.extract.base import Kind, Lifetime, Message
from memwarden.extract.rules import RuleExtractor
from memwarden.records import (
    ConsolidateInput,
    ConversationInput,
    MemoryType,
    MessageRole,
    Provenance,
    Scope,
    SourceKind,
    namespace_label,
)
from memwarden.services.consolidation import session_summary_slot
from memwarden.services.conversations import (
    CLAIM_CHECK_TTL,
    ConversationService,
    ConversationTarget,
    candidate_memory_id,
    park_conversation,
)
from memwarden.services.deps import Deps
from memwarden.services.run import Run
from memwarden.stores.sql_models import candidates
from memwarden.stores.summaries import summaries_touching
from tests.services_support import Clock, audit_log, seed, service_deps, tenant

NOW = datetime(2031, 2, 10, 9, 30, 15, tzinfo=UTC)
KEY = b"h" * 32
RUN = Run(workflow_id="conversation-wf-1", run_id="run-1")
SAID = [
    "From now on, keep your replies short.",
    "My thesis is due on March 3rd.",
    "For this ticket, keep the reply very short.",
]


@pytest.fixture
async def deps(tmp_path: Path) -> AsyncIterator[Deps]:
    async with service_deps(tmp_path) as opened:
        opened.clock = Clock(NOW)
        yield opened


def target(tenant_id: str, owner: str = "alice") -> ConversationTarget:
    return ConversationTarget(tenant_id, owner, Scope.USER, None, None, f"user:{owner}", f"pseudonym-{owner}")


async def park(deps: Deps, tenant_id: str, session: str, texts: list[str]) -> ConversationInput:
    messages = [Message(role=MessageRole.USER, content=t, turn_id=f"u{n}") for n, t in enumerate(texts)]
    return await park_conversation(deps.store, KEY, target(tenant_id), session, messages, received_at=deps.clock())


async def parked_expiries(deps: Deps, refs: list[str]) -> dict[str, datetime]:
    async with deps.store.engine.connect() as conn:
        c = candidates.c
        rows = await conn.execute(sa.select(c.ref, c.expires_at).where(c.ref.in_(refs)))
        return {ref: at if at.tzinfo else at.replace(tzinfo=UTC) for ref, at in rows}


async def test_a_conversation_is_proposed_with_kinds_lifetimes_and_deadlines_from_the_clock(deps: Deps) -> None:
    t = tenant()
    request = await park(deps, t, "s-1", SAID)
    service = ConversationService(deps, RuleExtractor())

    proposed = await service.propose(request)
    assert proposed.owner_id == "alice" and proposed.conversation.received_at == NOW
    assert [(p.message_index, p.kind, p.type, p.lifetime) for p in proposed.proposals] == [
        (0, Kind.PREFERENCE, MemoryType.PREFERENCE, Lifetime.DURABLE),
        (1, Kind.PLAN, MemoryType.TASK, Lifetime.DEADLINE),
        (2, Kind.TASK_GUIDANCE, MemoryType.TASK, Lifetime.TASK),
    ]
    due = datetime(2031, 3, 3, 23, 59, 59, tzinfo=UTC)
    assert proposed.proposals[1].ttl_seconds == int((due - NOW).total_seconds()) + 86400, "dated by the clock"

    extraction = await service.extract(request)
    got = extraction.candidates
    assert extraction.extractor == "rules-v1"
    assert [(c.message_index, c.turn_id, c.kind, c.candidate.type, c.known) for c in got] == [
        (0, "u0", "preference", MemoryType.PREFERENCE, None),
        (1, "u1", "plan", MemoryType.TASK, None),
        (2, "u2", "task_guidance", MemoryType.TASK, None),
    ]
    assert got[1].candidate.ttl_seconds == proposed.proposals[1].ttl_seconds
    assert got[0].candidate.slot == "pref.reply_length" and got[0].candidate.ttl_seconds is None
    assert got[2].candidate.slot is not None and got[2].candidate.slot.endswith(request.session_key[:16])
    assert all(c.candidate.source_kind is SourceKind.USER and c.candidate.owner_id == "" for c in got)
    assert "thesis" not in extraction.model_dump_json(), "sealed: ids, codes and hashes, never text"

    # Each candidate's content is parked under its memory id, expiring a day after the clock.
    turns = proposed.conversation.turn_keys
    ids = [c.candidate.memory_id for c in got]
    assert ids == [candidate_memory_id(request.namespace_key, turns[n], 0) for n in range(3)]
    assert [await deps.store.get_candidate(i) for i in ids] == SAID
    assert await parked_expiries(deps, ids) == dict.fromkeys(ids, NOW + CLAIM_CHECK_TTL)

    # Extracting again (a retry) names the same memories; the parked rows now expire by the moved clock.
    later = deps.clock.advance(hours=5)  # type: ignore[attr-defined]
    again = await service.extract(request)
    assert [c.candidate.memory_id for c in again.candidates] == ids
    assert await parked_expiries(deps, ids) == dict.fromkeys(ids, later + CLAIM_CHECK_TTL)


async def test_a_candidate_whose_memory_exists_comes_back_with_its_answer_and_is_not_parked(deps: Deps) -> None:
    t = tenant()
    request = await park(deps, t, "s-1", SAID[:1])
    service = ConversationService(deps, RuleExtractor())
    [first] = (await service.extract(request)).candidates
    await deps.store.delete_candidate(first.candidate.memory_id)
    # An earlier send's RememberWorkflow committed the candidate under its id.
    await seed(deps, t, "alice", SAID[0], type=MemoryType.PREFERENCE, memory_id=first.candidate.memory_id)
    [replayed] = (await service.extract(request)).candidates
    assert replayed.known is not None and replayed.known.memory_id == first.candidate.memory_id
    assert replayed.known.reason == "replayed" and replayed.known.decision.value == "ADD"
    assert await deps.store.get_candidate(first.candidate.memory_id) is None, "nothing is parked for it again"


async def test_a_gone_subject_handle_drops_the_parked_conversation(deps: Deps) -> None:
    request = await park(deps, tenant(), "s-1", SAID)
    await deps.store.delete_candidate(request.subject_ref)
    with pytest.raises(CandidateGone):
        await ConversationService(deps, RuleExtractor()).extract(request)
    assert await deps.store.get_candidate(request.conversation_ref) is None


async def test_guidance_repeated_in_enough_sessions_also_comes_as_a_durable_preference_of_the_app(
    deps: Deps,
) -> None:
    t = tenant()
    service = ConversationService(deps, RuleExtractor())
    said = ["For this ticket, keep the reply very short.", "For this email, keep it brief please."]
    for n, text in enumerate(said):  # kept in two earlier sessions, as their RememberWorkflows committed them
        [c] = (await service.extract(await park(deps, t, f"s-{n}", [text]))).candidates
        assert c.kind == "task_guidance"
        await seed(deps, t, "alice", text, type=MemoryType.TASK, slot=c.candidate.slot, memory_id=c.candidate.memory_id)
    third = await park(deps, t, "s-2", ["In this reply, be concise."])
    proposed = await service.propose(third)
    assert [(p.kind, p.type, p.lifetime, p.source_kind) for p in proposed.proposals] == [
        (Kind.TASK_GUIDANCE, MemoryType.TASK, Lifetime.TASK, SourceKind.USER),
        (Kind.REPEATED_GUIDANCE, MemoryType.PREFERENCE, Lifetime.DURABLE, SourceKind.APP),
    ]
    guidance, durable = (await service.extract(third)).candidates
    assert (durable.kind, durable.candidate.slot, durable.candidate.ttl_seconds) == (
        "repeated_guidance",
        "pref.reply_length",
        None,
    )
    assert durable.message_index == guidance.message_index == 0
    assert durable.candidate.memory_id != guidance.candidate.memory_id, "the second candidate of the turn"
    assert await deps.store.get_candidate(durable.candidate.memory_id) == "Be concise."


EPISODES = [
    "Yesterday I ran my first half marathon in Pune.",
    "Yesterday I finished the half marathon, my legs are sore.",
    "Last week I adopted a kitten from the shelter.",
]


async def test_consolidation_writes_the_session_summary_with_lineage_and_an_audit_event_of_the_run(
    deps: Deps,
) -> None:
    t = tenant()
    request = await park(deps, t, "s-episodes", EPISODES)
    episodes = [
        await seed(deps, t, "alice", text, type=MemoryType.EPISODIC, provenance=Provenance(session="s-episodes"))
        for text in EPISODES
    ]
    elsewhere = await seed(
        deps, t, "alice", EPISODES[0], type=MemoryType.EPISODIC, provenance=Provenance(session="s-other")
    )
    consolidate = ConsolidateInput(
        tenant_id=t,
        subject_ref=request.subject_ref,
        conversation_ref=request.conversation_ref,
        session_key=request.session_key,
        actor="pseudonym-alice",
        memory_ids=[e.id for e in episodes],
    )
    service = ConversationService(deps, RuleExtractor())
    deps.clock.advance(minutes=3)  # type: ignore[attr-defined]
    at = deps.clock()

    result = await service.consolidate(consolidate, RUN)
    assert result.summary_id is not None and result.derived_from == 2
    summary = await deps.store.get_memory(t, result.summary_id)
    assert summary is not None and summary.type is MemoryType.SUMMARY
    assert summary.slot == session_summary_slot(request.session_key) == f"summary.session.{request.session_key[:16]}"
    assert (summary.created_at, summary.valid_from, summary.updated_at) == (at, at, at)
    [(found, lineage)] = await summaries_touching(deps.store, t, [episodes[0].id])
    assert found.id == summary.id
    assert sorted(lineage) == sorted(e.id for e in episodes[:2]), "only the near-duplicates of this session"
    assert elsewhere.id not in lineage

    [event] = [e for e in await audit_log(deps, t) if e.operation == "summarize"]
    assert event.id == f"summary-{summary.id}" and event.at == at
    assert event.workflow_id == RUN.workflow_id
    assert (event.memory_id, event.reason, event.actor) == (summary.id, "session_consolidated", "pseudonym-alice")
    assert event.namespace == namespace_label(summary)
    assert event.details["derived_from"] == 2

    # A retry (or another run deriving the same summary) writes nothing twice.
    deps.clock.advance(hours=1)  # type: ignore[attr-defined]
    again = await service.consolidate(consolidate, Run(workflow_id="conversation-wf-2", run_id="run-2"))
    assert again == result
    assert [e.id for e in await audit_log(deps, t) if e.operation == "summarize"] == [event.id]


async def test_nothing_is_consolidated_without_near_duplicates_or_once_released(deps: Deps) -> None:
    t = tenant()
    request = await park(deps, t, "s-1", EPISODES[1:])
    episodes = [
        await seed(deps, t, "alice", text, type=MemoryType.EPISODIC, provenance=Provenance(session="s-1"))
        for text in EPISODES[1:]
    ]
    consolidate = ConsolidateInput(
        tenant_id=t,
        subject_ref=request.subject_ref,
        conversation_ref=request.conversation_ref,
        session_key=request.session_key,
        actor="pseudonym-alice",
        memory_ids=[e.id for e in episodes],
    )
    service = ConversationService(deps, RuleExtractor())
    assert (await service.consolidate(consolidate, RUN)).summary_id is None, "a marathon and a kitten differ"
    await seed(deps, t, "alice", EPISODES[0], type=MemoryType.EPISODIC, provenance=Provenance(session="s-1"))
    await service.release(request.conversation_ref)
    assert await deps.store.get_candidate(request.conversation_ref) is None
    assert (await service.consolidate(consolidate, RUN)).summary_id is None, "released: a finished run's retry"
    assert [e for e in await audit_log(deps, t) if e.operation == "summarize"] == []
