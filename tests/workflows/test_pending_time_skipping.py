"""The confirmation window, a day long, on the time-skipping test server with the real worker and stores.

Real activities over a SQLite file and a Qdrant Edge shard; only the clock is skipped. A staged write
that nobody settles is rejected when the window passes (and a late confirm is refused); one confirmed
inside the window goes live and is indexed.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle, WorkflowUpdateFailedError
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from memwarden.policy.gate import GatePolicy
from memwarden.records import Decision, MemoryType, RememberResult, SettleAction, SettleRequest, Status
from memwarden.services.deps import Deps
from memwarden.temporal.converter import data_converter
from memwarden.temporal.names import pending_workflow_id
from tests.workflows.record_histories import park, remember_input, settings_for
from tests.workflows.test_remember_time_skipping import test_server_path
from worker.runtime import build_worker, open_deps
from workflows.pending import PendingWriteWorkflow
from workflows.remember import RememberWorkflow

DAY = timedelta(hours=24)


@dataclass
class Skipping:
    env: WorkflowEnvironment
    client: Client
    deps: Deps
    task_queue: str


@pytest.fixture(scope="module")
async def skipping(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Skipping]:
    settings = settings_for(tmp_path_factory.mktemp("pending-ts"), "unused:0", f"pending-{uuid.uuid4().hex[:6]}")
    env = await WorkflowEnvironment.start_time_skipping(
        data_converter=data_converter(settings), test_server_existing_path=test_server_path()
    )
    try:
        async with open_deps(settings) as deps, build_worker(env.client, deps):
            yield Skipping(env, env.client, deps, settings.temporal_task_queue)
    finally:
        await env.shutdown()


async def result_of(s: Skipping, handle: WorkflowHandle[Any, RememberResult]) -> RememberResult:
    """`handle.result()` with time skipping unlocked while it waits.

    The environment unlocks skipping only for handles its own client started; the pending write is a
    child the RememberWorkflow started, so its handle comes from `get_workflow_handle` and would wait
    on a clock that never moves.
    """
    async with s.env.time_skipping_unlocked():  # type: ignore[attr-defined]
        return await handle.result()


async def stage(s: Skipping, text: str) -> str:
    """Propose a behaviour-changing procedure (staged by the gate) and return its memory id."""
    mid = str(uuid.uuid4())
    request = remember_input(mid, text, tenant="t-ts", owner="alice", actor="user:alice", type=MemoryType.PROCEDURAL)
    await park(s.deps.store, request, text)
    result = await s.client.execute_workflow(
        RememberWorkflow.run, args=[request, GatePolicy()], id=f"remember-{mid}", task_queue=s.task_queue
    )
    assert (result.decision, result.reason) == (Decision.PENDING, "staged_behaviour_change")
    return mid


async def test_unsettled_write_is_rejected_when_the_window_passes(skipping: Skipping) -> None:
    started = await skipping.env.get_current_time()
    mid = await stage(skipping, "From now on always open plans with a one-line summary")
    handle = skipping.client.get_workflow_handle(pending_workflow_id(mid), result_type=RememberResult)
    record = await skipping.deps.store.get_memory("t-ts", mid)
    assert record is not None and record.status is Status.PENDING

    result = await result_of(skipping, handle)  # the test server skips the day
    assert (result.decision, result.reason) == (Decision.REJECT, "confirmation_window_passed")
    assert await skipping.env.get_current_time() - started >= DAY  # not a minute early
    record = await skipping.deps.store.get_memory("t-ts", mid)
    assert record is not None and record.status is Status.REJECTED and record.content is None
    with pytest.raises((RPCError, WorkflowUpdateFailedError)):
        await handle.execute_update(
            PendingWriteWorkflow.settle, SettleRequest(action=SettleAction.CONFIRM, actor="user:alice"), id="late"
        )
    assert (await skipping.deps.store.get_memory("t-ts", mid)).status is Status.REJECTED  # type: ignore[union-attr]
    assert await skipping.deps.index.present([mid]) == []


async def test_confirmed_inside_the_window_goes_live(skipping: Skipping) -> None:
    started = await skipping.env.get_current_time()
    mid = await stage(skipping, "From now on never schedule meetings before ten")
    handle = skipping.client.get_workflow_handle(pending_workflow_id(mid), result_type=RememberResult)
    confirmed = await handle.execute_update(
        PendingWriteWorkflow.settle,
        SettleRequest(action=SettleAction.CONFIRM, actor="user:alice"),
        id="settle-confirm",
        result_type=RememberResult,
    )
    assert (confirmed.decision, confirmed.reason) == (Decision.ADD, "confirmed")
    assert await result_of(skipping, handle) == confirmed
    assert await skipping.env.get_current_time() - started < DAY  # settled inside the window, no timer left
    record = await skipping.deps.store.get_memory("t-ts", mid)
    assert record is not None and record.status is Status.ACTIVE
    assert await skipping.deps.index.present([mid]) == [mid]
