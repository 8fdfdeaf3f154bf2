"""RollbackWorkflow's orchestration on the time-skipping test server, its activities stood in by name.

A derivative that stays out of line for hours (simulated: the backoff timers are skipped) delays the
receipt and never drops it; the restore runs once, before any sink; the healthy sinks are not redone;
the receipt is issued once, only after every sink checked out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator

import pytest
from temporalio import activity
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from memwarden.records import RollbackInput, RollbackPlan, RollbackResult, RollbackTask, SinkEvidence
from memwarden.temporal.names import ROLLBACK_APPLY, ROLLBACK_FINISH, ROLLBACK_RESTORE, ROLLBACK_VERIFY
from memwarden.temporal.sandbox import SANDBOX
from tests.workflows.test_remember_time_skipping import test_server_path
from workflows.remediation import RollbackWorkflow

DOWN_APPLIES = 4
UNCHECKED_ROUNDS = 9


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    environment = await WorkflowEnvironment.start_time_skipping(
        data_converter=pydantic_data_converter, test_server_existing_path=test_server_path()
    )
    yield environment
    await environment.shutdown()


async def test_a_lagging_sink_delays_the_rollback_receipt_and_never_drops_it(env: WorkflowEnvironment) -> None:
    order: list[str] = []
    applies: Counter[str] = Counter()
    checks: Counter[str] = Counter()

    @activity.defn(name=ROLLBACK_RESTORE)
    async def standin_restore(request: RollbackInput) -> RollbackPlan:
        order.append("restore")
        return RollbackPlan(sinks=["cache", "summaries"], members=2, restored=1)

    @activity.defn(name=ROLLBACK_APPLY)
    async def standin_apply(task: RollbackTask) -> int:
        order.append(f"apply:{task.sink}")
        applies[task.sink] += 1
        if task.sink == "summaries" and applies[task.sink] <= DOWN_APPLIES:
            raise ConnectionError("summarizer unreachable")
        return 1

    @activity.defn(name=ROLLBACK_VERIFY)
    async def standin_verify(task: RollbackTask) -> SinkEvidence:
        checks[task.sink] += 1
        ok = task.sink != "summaries" or checks[task.sink] > UNCHECKED_ROUNDS
        return SinkEvidence(sink=task.sink, method="standin", absent=ok, checked=2, remaining=0 if ok else 1)

    @activity.defn(name=ROLLBACK_FINISH)
    async def standin_finish(request: RollbackInput) -> RollbackResult:
        order.append("finish")
        assert checks["summaries"] == UNCHECKED_ROUNDS + 1
        return RollbackResult(rollback_id=request.rollback_id, receipt_hash="r" * 64, sinks=[])

    request = RollbackInput(rollback_id="r-1", tenant_id="t-1")
    async with Worker(
        env.client,
        task_queue="tq-rollback",
        workflows=[RollbackWorkflow],
        activities=[standin_restore, standin_apply, standin_verify, standin_finish],
        workflow_runner=SANDBOX,
    ):
        handle = await env.client.start_workflow(
            RollbackWorkflow.run, request, id="rollback-r-1", task_queue="tq-rollback"
        )
        result = await handle.result()
    assert result.rollback_id == "r-1"
    assert order[0] == "restore" and order[-1] == "finish" and order.count("finish") == 1
    assert applies["cache"] == 1 and checks["cache"] == 1
    assert applies["summaries"] == DOWN_APPLIES + UNCHECKED_ROUNDS + 1
