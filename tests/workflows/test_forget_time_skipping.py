"""ForgetWorkflow's orchestration on the time-skipping test server, its activities stood in by name.

A sink that stays down for a long time (simulated hours: the backoff timers are skipped) delays the
deletion and never drops it: purge attempts are retried, unverified rounds wait on durable timers
that back off to 60 s, the other sinks are not touched again, and the receipt is issued exactly once,
only when every sink has verified.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from temporalio import activity
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from memwarden.records import ForgetInput, ForgetPlan, ForgetResult, SinkEvidence, SinkTask
from memwarden.temporal.names import FORGET_FINISH, FORGET_PLAN, FORGET_PURGE, FORGET_VERIFY
from memwarden.temporal.sandbox import SANDBOX
from tests.workflows.test_remember_time_skipping import test_server_path
from workflows.forget import ROUND_BACKOFF_MAX, ForgetWorkflow

DOWN_PURGES = 6
UNVERIFIED_ROUNDS = 12


@pytest.fixture(scope="module")
async def env() -> WorkflowEnvironment:
    environment = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter, test_server_existing_path=test_server_path()
    )
    yield environment  # type: ignore[misc]
    await environment.shutdown()


async def test_a_sink_down_for_hours_delays_the_receipt_and_never_drops_it(env: WorkflowEnvironment) -> None:
    purges: Counter[str] = Counter()
    verifies: Counter[str] = Counter()
    finished: list[str] = []

    @activity.defn(name=FORGET_PLAN)
    async def standin_plan(request: ForgetInput) -> ForgetPlan:
        return ForgetPlan(sinks=["cache", "slow_replica"], members=3)

    @activity.defn(name=FORGET_PURGE)
    async def standin_purge(task: SinkTask) -> int:
        purges[task.sink] += 1
        if task.sink == "slow_replica" and purges[task.sink] <= DOWN_PURGES:
            raise ConnectionError("replica unreachable")
        return 3

    @activity.defn(name=FORGET_VERIFY)
    async def standin_verify(task: SinkTask) -> SinkEvidence:
        verifies[task.sink] += 1
        absent = task.sink != "slow_replica" or verifies[task.sink] > UNVERIFIED_ROUNDS
        return SinkEvidence(sink=task.sink, method="standin", absent=absent, checked=3, remaining=0 if absent else 1)

    @activity.defn(name=FORGET_FINISH)
    async def standin_finish(request: ForgetInput) -> ForgetResult:
        assert verifies["slow_replica"] == UNVERIFIED_ROUNDS + 1  # never before the last sink verified
        finished.append(request.deletion_id)
        return ForgetResult(deletion_id=request.deletion_id, receipt_hash="f" * 64, sinks=[])

    request = ForgetInput(deletion_id="d-1", tenant_id="t-1")
    async with Worker(
        env.client,
        task_queue="tq-forget",
        workflows=[ForgetWorkflow],
        activities=[standin_plan, standin_purge, standin_verify, standin_finish],
        workflow_runner=SANDBOX,
    ):
        handle = await env.client.start_workflow(ForgetWorkflow.run, request, id="forget-d-1", task_queue="tq-forget")
        result = await handle.result()
    assert result.deletion_id == "d-1" and finished == ["d-1"]
    assert purges["cache"] == 1 and verifies["cache"] == 1  # the healthy sink is done once, not redone
    # Each unverified round purges again (idempotent), after its attempts while the replica was down.
    assert purges["slow_replica"] == DOWN_PURGES + UNVERIFIED_ROUNDS + 1

    timers = [
        e.timer_started_event_attributes.start_to_fire_timeout.ToTimedelta()
        for e in (await handle.fetch_history()).events
        if e.HasField("timer_started_event_attributes")
    ]
    assert timers[:7] == [timedelta(seconds=s) for s in (1, 2, 4, 8, 16, 32, 60)]
    assert timers[7:] == [ROUND_BACKOFF_MAX] * (UNVERIFIED_ROUNDS - 7)
