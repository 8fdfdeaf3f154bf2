"""SummarizeWorkflow: consolidate an owner's episodic memories into one `summary` memory.

One activity does the work (read the sources, summarize, commit with `derived_from` lineage, index);
it is idempotent because the summary's id is a function of its sources.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

from memwarden.records import SummarizeInput, SummarizeResult
from memwarden.temporal.names import SUMMARIZE_OWNER


@workflow.defn(name="SummarizeWorkflow")
class SummarizeWorkflow:
    @workflow.run
    async def run(self, request: SummarizeInput) -> SummarizeResult:
        return await workflow.execute_activity(
            SUMMARIZE_OWNER,
            request,
            result_type=SummarizeResult,
            start_to_close_timeout=timedelta(minutes=2),
            retry_policy=RetryPolicy(initial_interval=timedelta(seconds=1), maximum_attempts=10),
        )
