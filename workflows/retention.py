"""RetentionWorkflow: expiry goes through Forget, like any other deletion.

Run on a Temporal Schedule (`worker.schedules`). One activity tombstones, per tenant, the memories past
`expires_at` (they become `expired` at once) and records one deletion each; then a ForgetWorkflow per
deletion purges every sink and issues the receipt, as a child so the sweep's history shows them.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from memwarden.records import ForgetInput, ForgetResult, RetentionPlan
from memwarden.temporal.names import RETENTION_PLAN
from workflows.forget import ForgetWorkflow


@workflow.defn(name="RetentionWorkflow")
class RetentionWorkflow:
    @workflow.run
    async def run(self) -> int:
        plan = await workflow.execute_activity(
            RETENTION_PLAN,
            result_type=RetentionPlan,
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=5),
        )
        results = await asyncio.gather(*(self._forget(d) for d in plan.deletions))
        return sum(results)

    async def _forget(self, deletion: ForgetInput) -> int:
        try:
            await workflow.execute_child_workflow(
                ForgetWorkflow.run,
                deletion,
                id=f"forget-{deletion.deletion_id}",
                result_type=ForgetResult,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
            )
        except WorkflowAlreadyStartedError:
            return 0  # an earlier sweep's ForgetWorkflow owns this deletion
        return 1
