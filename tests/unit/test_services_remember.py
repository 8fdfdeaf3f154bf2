"""RememberService without Temporal: the write gate's decisions, rows and audit events, on real stores.

The clock and the run are the test's: every time the service stamps is the fixed clock, every audit
event names the run it was given, and a retry in the same run appends nothing twice.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from memwarden.errors import CandidateGone
from memwarden.policy.gate import GatePolicy, GateReason, Remembered, commit_input
from memwarden.records import (
    Decision,
    MemoryType,
    Provenance,
    RememberInput,
    Scope,
    Sensitivity,
    SettleAction,
    SettleRequest,
    SourceKind,
    Status,
    content_hash,
    namespace_label,
)
from memwarden.services.deps import Deps
from memwarden.services.remember import RememberService, audit_id
from memwarden.services.run import Run
from tests.services_support import FIXED, RUN, Clock, audit_log, service_deps, tenant

POLICY = GatePolicy()


@pytest.fixture
async def deps(tmp_path: Path) -> AsyncIterator[Deps]:
    async with service_deps(tmp_path) as opened:
        yield opened


def candidate(tenant_id: str, content: str, **fields: object) -> RememberInput:
    memory_id = str(uuid.uuid4())
    values: dict[str, object] = {
        "memory_id": memory_id,
        "candidate_ref": memory_id,
        "content_hash": content_hash(content),
        "content_chars": len(content),
        "tenant_id": tenant_id,
        "owner_id": "alice",
        "scope": Scope.USER,
        "agent_id": None,
        "store": None,
        "source_ref": None,
        "slot": None,
        "ttl_seconds": None,
        "type": MemoryType.PREFERENCE,
        "source_kind": SourceKind.USER,
        "provenance": Provenance(session="s-1", writer="user:alice"),
        "reason": "user_explicit_preference",
        "importance": 0.7,
        "sensitivity": Sensitivity.LOW,
        "actor": "user:alice",
    }
    values.update(fields)
    return RememberInput.model_validate(values)


async def propose(deps: Deps, c: RememberInput, content: str, run: Run = RUN) -> Remembered:
    await deps.store.put_candidate(c.candidate_ref, c.tenant_id, content, FIXED + timedelta(days=3650))
    return await RememberService(deps).remember(c, POLICY, run)


async def test_an_accepted_candidate_is_stored_at_the_injected_time_with_its_create_event(deps: Deps) -> None:
    t = tenant()
    text = "synthetic: alice prefers the teal theme for charts"
    c = candidate(t, text, slot="ui.theme", ttl_seconds=3600)
    remembered = await propose(deps, c, text)
    assert (remembered.result.decision, remembered.result.reason) == (Decision.ADD, "accepted")

    row = await deps.store.get_memory(t, c.memory_id)
    assert row is not None and row.status is Status.ACTIVE and row.content == text
    assert row.created_at == row.updated_at == row.valid_from == row.last_confirmed_at == FIXED
    assert row.expires_at == FIXED + timedelta(seconds=3600)
    assert await deps.store.get_candidate(c.candidate_ref) is None, "the claim check goes with the commit"

    [event] = await audit_log(deps, t)
    assert (event.operation, event.reason, event.memory_id) == ("create", "accepted", c.memory_id)
    assert event.at == FIXED
    assert event.workflow_id == RUN.workflow_id
    assert event.namespace == namespace_label(c) == "user:alice"
    assert event.id == audit_id("create", c.memory_id, RUN)
    assert event.details["decision"] == "ADD"


async def test_a_changed_slot_value_supersedes_its_holder_at_the_later_time(deps: Deps) -> None:
    t = tenant()
    first = candidate(t, "synthetic: alice prefers the teal theme for charts", slot="ui.theme")
    await propose(deps, first, "synthetic: alice prefers the teal theme for charts")
    clock: Clock = deps.clock  # type: ignore[assignment]
    later = clock.advance(minutes=5)
    newer = candidate(t, "synthetic: alice prefers the amber theme for charts", slot="ui.theme")
    remembered = await propose(deps, newer, "synthetic: alice prefers the amber theme for charts")

    result = remembered.result
    assert (result.decision, result.reason, result.supersedes) == (
        Decision.UPDATE,
        "slot_value_changed",
        first.memory_id,
    )
    old = await deps.store.get_memory(t, first.memory_id)
    new = await deps.store.get_memory(t, newer.memory_id)
    assert old is not None and old.status is Status.SUPERSEDED
    assert new is not None and new.supersedes == first.memory_id and new.created_at == later
    assert [(e.operation, e.reason, e.at) for e in await audit_log(deps, t)] == [
        ("create", "accepted", FIXED),
        ("update", "slot_value_changed", later),
    ]


async def test_a_secret_is_denied_without_a_row_or_a_content_hash_and_a_retry_reads_the_denial(deps: Deps) -> None:
    t = tenant()
    text = "synthetic deploy key AKIAZ7QXW3SYNTH5EXMP with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYSYNTHETICKEY"
    c = candidate(t, text, type=MemoryType.FACT, reason="user_stated_fact")
    remembered = await propose(deps, c, text)
    assert (remembered.result.decision, remembered.result.reason) == (Decision.REJECT, "secret_detected")
    assert await deps.store.get_memory(t, c.memory_id) is None

    [event] = await audit_log(deps, t)
    assert (event.operation, event.reason, event.at) == ("deny", "secret_detected", FIXED)
    assert "content_hash" not in event.details
    assert event.id == audit_id("deny", c.memory_id, RUN), "a decision's event is keyed by its run"

    service = RememberService(deps)
    again = await service.remember(c, POLICY, RUN)  # same run, claim check gone: answered from the event
    assert again.result == remembered.result
    assert len(await audit_log(deps, t)) == 1
    with pytest.raises(CandidateGone):  # another run has no decision on record and nothing to screen
        await service.remember(c, POLICY, Run(workflow_id="wf-other", run_id="run-other"))


async def test_a_sensitive_candidate_is_staged_then_confirmed_at_the_confirmation_time(deps: Deps) -> None:
    t = tenant()
    text = "synthetic: alice's locker code at the gym is on the blue card"
    c = candidate(t, text, type=MemoryType.FACT, reason="user_stated_fact", sensitivity=Sensitivity.CONFIDENTIAL)
    remembered = await propose(deps, c, text)
    decision = remembered.decision
    assert (decision.decision, decision.reason) == (Decision.PENDING, GateReason.STAGED_SENSITIVE)
    staged = await deps.store.get_memory(t, c.memory_id)
    assert staged is not None and staged.status is Status.PENDING and staged.created_at == FIXED

    clock: Clock = deps.clock  # type: ignore[assignment]
    confirmed_at = clock.advance(hours=2)
    settled = await RememberService(deps).settle(
        commit_input(c, decision), SettleRequest(action=SettleAction.CONFIRM, actor="user:alice"), RUN
    )
    assert (settled.decision, settled.reason) == (Decision.ADD, "confirmed")
    live = await deps.store.get_memory(t, c.memory_id)
    assert live is not None and live.status is Status.ACTIVE
    assert live.last_confirmed_at == live.valid_from == live.updated_at == confirmed_at
    events = await audit_log(deps, t)
    assert [(e.operation, e.reason, e.actor, e.at) for e in events] == [
        ("stage", "staged_sensitive", "user:alice", FIXED),
        ("confirm", "confirmed", "user:alice", confirmed_at),
    ]


async def test_a_declined_pending_write_is_rejected_with_its_event_at_the_decline_time(deps: Deps) -> None:
    t = tenant()
    text = "synthetic: alice's locker code at the gym is on the green card"
    c = candidate(t, text, type=MemoryType.FACT, reason="user_stated_fact", sensitivity=Sensitivity.CONFIDENTIAL)
    remembered = await propose(deps, c, text)
    clock: Clock = deps.clock  # type: ignore[assignment]
    declined_at = clock.advance(minutes=30)
    settled = await RememberService(deps).settle(
        commit_input(c, remembered.decision),
        SettleRequest(action=SettleAction.DECLINE, actor="user:alice"),
        RUN,
    )
    assert (settled.decision, settled.reason) == (Decision.REJECT, "declined")
    row = await deps.store.get_memory(t, c.memory_id)
    assert row is not None and row.status is Status.REJECTED
    assert [(e.operation, e.reason, e.at) for e in await audit_log(deps, t)][-1] == ("reject", "declined", declined_at)


async def test_settling_a_write_that_was_never_staged_is_candidate_gone(deps: Deps) -> None:
    c = candidate(tenant(), "synthetic: nothing was staged for this one")
    gate = (await propose(deps, c, "synthetic: nothing was staged for this one")).decision
    other = c.model_copy(update={"memory_id": str(uuid.uuid4())})
    with pytest.raises(CandidateGone):
        await RememberService(deps).settle(
            commit_input(other, gate), SettleRequest(action=SettleAction.CONFIRM, actor="user:alice"), RUN
        )
