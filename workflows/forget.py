"""ForgetWorkflow: fan out to every sink in parallel, verify each, retry until verified, then a receipt.

The API has already tombstoned the memories (synchronously, before its 202), so nothing here races a
reader. Per sink: purge, then an independent read-back; not yet absent -> a durable timer with
backoff and another round. Activities retry without an attempt limit: a sink that is down delays
completion, it never drops it. The input is the deletion id alone; lineage stays in the store.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

from memwarden.records import ForgetInput, ForgetPlan, ForgetResult, SinkEvidence, SinkTask
from memwarden.temporal.names import FORGET_FINISH, FORGET_PLAN, FORGET_PURGE, FORGET_VERIFY

UNTIL_DONE = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=0,  # unlimited: a sink that is down delays the deletion, never drops it
    non_retryable_error_types=["DeletionMissing", "UnknownSink"],
)
ROUND_BACKOFF_START = timedelta(seconds=1)
ROUND_BACKOFF_MAX = timedelta(seconds=60)
SINK_TIMEOUT = timedelta(minutes=10)
HEARTBEAT = timedelta(seconds=10)


@workflow.defn(name="ForgetWorkflow")
class ForgetWorkflow:
    @workflow.run
    async def run(self, request: ForgetInput) -> ForgetResult:
        plan = await workflow.execute_activity(
            FORGET_PLAN,
            request,
            result_type=ForgetPlan,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=UNTIL_DONE,
        )
        await asyncio.gather(*(self._sink(request, name) for name in plan.sinks))
        return await workflow.execute_activity(
            FORGET_FINISH,
            request,
            result_type=ForgetResult,
            start_to_close_timeout=timedelta(seconds=60),
            retry_policy=UNTIL_DONE,
        )

    async def _sink(self, request: ForgetInput, name: str) -> SinkEvidence:
        delay = ROUND_BACKOFF_START
        attempt = 0
        while True:
            attempt += 1
            task = SinkTask(deletion_id=request.deletion_id, tenant_id=request.tenant_id, sink=name, attempt=attempt)
            await workflow.execute_activity(
                FORGET_PURGE,
                task,
                result_type=int,
                start_to_close_timeout=SINK_TIMEOUT,
                heartbeat_timeout=HEARTBEAT,
                retry_policy=UNTIL_DONE,
            )
            evidence = await workflow.execute_activity(
                FORGET_VERIFY,
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
