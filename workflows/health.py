"""HealthWorkflow: how the API learns the index's health without opening it.

Qdrant Edge lives inside the worker's process; the API asks through Temporal instead.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

from memwarden.temporal.names import INDEX_HEALTH


@workflow.defn(name="HealthWorkflow")
class HealthWorkflow:
    @workflow.run
    async def run(self) -> bool:
        return await workflow.execute_local_activity(
            INDEX_HEALTH,
            result_type=bool,
            start_to_close_timeout=timedelta(seconds=3),
            retry_policy=RetryPolicy(maximum_attempts=1),
        )
