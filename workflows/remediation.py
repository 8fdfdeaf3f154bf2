"""RevertWorkflow and RollbackWorkflow: take bad values back out of use, and bring the prior ones back.

RevertWorkflow (`revert-<memory id>` or `release-<memory id>`) runs one activity: undo the supersession a
live version made, or let a quarantined write go back into use; the workflow id makes the same request
twice one revert. RollbackWorkflow (`rollback-<rollback id>`) runs after the API has quarantined the
selected writes (synchronously, before its answer): it restores what each superseded, then brings
every derivative in line in parallel (index, cache, summaries, replicas), each applied and checked
independently with a durable timer between rounds, and ends with a receipt chained into the audit log.
Inputs are ids; the store holds the lineage.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

from memwarden.records import (
    RevertInput,
    RevertResult,
    RollbackInput,
    RollbackPlan,
    RollbackResult,
    RollbackTask,
    SinkEvidence,
)
from memwarden.temporal.names import (
    REVERT_MEMORY,
    ROLLBACK_APPLY,
    ROLLBACK_FINISH,
    ROLLBACK_RESTORE,
    ROLLBACK_VERIFY,
)

UNTIL_DONE = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=0,  # a sink that is down delays the receipt, never drops it
    non_retryable_error_types=["RollbackMissing", "UnknownSink"],
)
REVERT_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=10))
ROUND_BACKOFF_START = timedelta(seconds=1)
ROUND_BACKOFF_MAX = timedelta(seconds=60)
SINK_TIMEOUT = timedelta(minutes=10)
HEARTBEAT = timedelta(seconds=10)


def revert_workflow_id(action: str, memory_id: str) -> str:
    """One revert (or release) per memory version: a repeated request meets the first run."""
    return f"{action}-{memory_id}"


@workflow.defn(name="RevertWorkflow")
class RevertWorkflow:
    @workflow.run
    async def run(self, request: RevertInput) -> RevertResult:
        return await workflow.execute_activity(
            REVERT_MEMORY,
            request,
            result_type=RevertResult,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=REVERT_RETRY,
        )


@workflow.defn(name="RollbackWorkflow")
class RollbackWorkflow:
    @workflow.run
    async def run(self, request: RollbackInput) -> RollbackResult:
        plan = await workflow.execute_activity(
            ROLLBACK_RESTORE,
            request,
            result_type=RollbackPlan,
            start_to_close_timeout=timedelta(minutes=5),
            heartbeat_timeout=None,
            retry_policy=UNTIL_DONE,
        )
        await asyncio.gather(*(self._sink(request, name) for name in plan.sinks))
        return await workflow.execute_activity(
            ROLLBACK_FINISH,
            request,
            result_type=RollbackResult,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=UNTIL_DONE,
        )

    async def _sink(self, request: RollbackInput, name: str) -> SinkEvidence:
        delay = ROUND_BACKOFF_START
        attempt = 0
        while True:
            attempt += 1
            task = RollbackTask(
                rollback_id=request.rollback_id, tenant_id=request.tenant_id, sink=name, attempt=attempt
            )
            await workflow.execute_activity(
                ROLLBACK_APPLY,
                task,
                result_type=int,
                start_to_close_timeout=SINK_TIMEOUT,
                heartbeat_timeout=HEARTBEAT,
                retry_policy=UNTIL_DONE,
            )
            evidence = await workflow.execute_activity(
                ROLLBACK_VERIFY,
                task,
                result_type=SinkEvidence,
                start_to_close_timeout=SINK_TIMEOUT,
                heartbeat_timeout=HEARTBEAT,
                retry_policy=UNTIL_DONE,
            )
            if evidence.absent:
                return evidence
            await workflow.sleep(delay)
            delay = min(delay * 2, ROUND_BACKOFF_MAX)
