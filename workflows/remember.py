"""RememberWorkflow: a candidate becomes durable memory only through this workflow.

The candidate's content never enters history: the API parks it in the store's claim-check table
and the workflow passes the reference. Steps are local activities, so one proposal costs one
workflow task round trip when eagerly started.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from memwarden.records import RememberInput, RememberResult
    from workflows.names import COMMIT_MEMORY

# Bounded by attempts as well as by schedule-to-close: a local activity's deadline is measured on the
# worker's clock, attempts are not, so the bound holds under time skipping too (~3 min of backoff).
COMMIT_MAX_ATTEMPTS = 40
COMMIT_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=COMMIT_MAX_ATTEMPTS,
)


@workflow.defn(name="RememberWorkflow")
class RememberWorkflow:
    @workflow.run
    async def run(self, candidate: RememberInput) -> RememberResult:
        return await workflow.execute_local_activity(
            COMMIT_MEMORY,
            candidate,
            result_type=RememberResult,
            start_to_close_timeout=timedelta(seconds=10),
            schedule_to_close_timeout=timedelta(minutes=5),
            retry_policy=COMMIT_RETRY,
            # Backoffs longer than this become workflow timers: durable, and skippable in tests.
            local_retry_threshold=timedelta(seconds=1),
        )
