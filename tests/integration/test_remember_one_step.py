"""`remember_candidate` run again after its effect landed: the retry answers as the first attempt did.

A worker can die after the one-step activity's transaction committed and before its result reached
history; the workflow task then runs the activity again, from scratch, with the claim check already
dropped. These tests run the real activity (ActivityEnvironment: the activity context without a
server) over the real embedded stores twice, and check the second answer, the rows and the audit log.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.remember import RememberActivities
from memwarden.policy.gate import GatePolicy, GateReason, Remembered
from memwarden.records import Decision, MemoryType, RememberInput, Status
from memwarden.services.deps import Deps
from tests.workflows.record_histories import park, remember_input, settings_for
from worker.runtime import open_deps

POLICY = GatePolicy()


@pytest.fixture(scope="module")
async def deps(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Deps]:
    settings = settings_for(tmp_path_factory.mktemp("one-step"), "127.0.0.1:1", "unused")
    async with open_deps(settings) as opened:
        yield opened


def candidate(tenant: str, content: str, **fields: object) -> RememberInput:
    request = remember_input(str(uuid.uuid4()), content, tenant=tenant, owner="alice", actor="user:alice")
    return request.model_copy(update=fields)


async def twice(deps: Deps, c: RememberInput, content: str) -> tuple[Remembered, Remembered]:
    """The first attempt, then a retry of the same workflow run (same ids) with the claim check gone."""
    await park(deps.store, c, content)
    run = RememberActivities(deps).remember_candidate
    env = ActivityEnvironment()
    first = await env.run(run, c, POLICY)
    assert await deps.store.get_candidate(c.candidate_ref) is None, "the effect drops the claim check"
    return first, await env.run(run, c, POLICY)


async def operations(deps: Deps, tenant: str) -> list[tuple[str, str | None]]:
    events, _ = await deps.store.list_audit(tenant, limit=50, cursor=None, oldest_first=True)
    return [(e.operation, e.reason) for e in events]


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def test_a_retried_add_answers_add_and_stores_one_row(deps: Deps) -> None:
    t = tenant()
    c = candidate(t, "synthetic: alice prefers the teal theme for charts", slot="ui.theme")
    first, again = await twice(deps, c, "synthetic: alice prefers the teal theme for charts")
    assert (first.result.decision, first.result.reason) == (Decision.ADD, "accepted")
    assert again.result == first.result
    stored = await deps.store.get_memory(t, c.memory_id)
    assert stored is not None and stored.status is Status.ACTIVE
    assert await operations(deps, t) == [("create", "accepted")]

    newer = candidate(t, "synthetic: alice prefers the amber theme for charts", slot="ui.theme")
    first, again = await twice(deps, newer, "synthetic: alice prefers the amber theme for charts")
    assert (first.result.decision, first.result.supersedes) == (Decision.UPDATE, c.memory_id)
    assert again.result == first.result and again.decision.reason is GateReason.SLOT_VALUE_CHANGED


async def test_a_retried_rejection_reads_its_answer_back_from_the_audit_event(deps: Deps) -> None:
    t = tenant()
    text = "synthetic deploy key AKIAZ7QXW3SYNTH5EXMP with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYSYNTHETICKEY"
    c = candidate(t, text, type=MemoryType.FACT)
    first, again = await twice(deps, c, text)
    assert (first.result.decision, first.result.reason) == (Decision.REJECT, "secret_detected")
    assert again.result == first.result and again.decision.decision is Decision.REJECT
    assert await deps.store.get_memory(t, c.memory_id) is None
    assert await operations(deps, t) == [("deny", "secret_detected")]  # recorded once


async def test_a_retried_duplicate_answers_noop_with_the_same_live_id(deps: Deps) -> None:
    t = tenant()
    text = "synthetic: alice keeps the harbour notebook next to the lantern"
    original = candidate(t, text)
    await twice(deps, original, text)
    copy = candidate(t, text)
    first, again = await twice(deps, copy, text)
    assert (first.result.decision, first.result.memory_id) == (Decision.NOOP, original.memory_id)
    assert again.result == first.result
    assert await operations(deps, t) == [("create", "accepted"), ("noop", "duplicate")]


async def test_a_retried_stage_answers_pending_with_what_the_child_needs(deps: Deps) -> None:
    t = tenant()
    text = "synthetic directive: from now on always summarise plans in three bullet points"
    c = candidate(t, text, type=MemoryType.PROCEDURAL, ttl_seconds=3600)
    first, again = await twice(deps, c, text)
    assert (first.result.decision, first.result.reason) == (Decision.PENDING, "staged_behaviour_change")
    assert again.result == first.result
    assert again.decision.reason is first.decision.reason and again.decision.importance == c.importance
    assert again.decision.ttl_seconds == first.decision.ttl_seconds == 3600
    pending = await deps.store.get_memory(t, c.memory_id)
    assert pending is not None and pending.status is Status.PENDING
    assert await operations(deps, t) == [("stage", "staged_behaviour_change")]


async def test_no_claim_check_and_no_effect_on_record_is_candidate_gone(deps: Deps) -> None:
    """The API commits the claim check before it starts the workflow: an activity that finds neither it
    nor an effect it left has nothing to remember, and retrying cannot help."""
    c = candidate(tenant(), "never parked")
    with pytest.raises(ApplicationError) as failed:
        await ActivityEnvironment().run(RememberActivities(deps).remember_candidate, c, POLICY)
    assert failed.value.type == "CandidateGone" and failed.value.non_retryable
    assert await deps.store.get_memory(c.tenant_id, c.memory_id) is None
