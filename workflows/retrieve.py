"""RetrieveWorkflow: decide *which* memories a principal gets, by id and score.

Authorization travels inside the input as a ReadFilter computed from the verified token, and the
activity applies it inside the index query. Content is loaded by the API afterwards (claim check),
so results in history are ids and scores only.

Read-time revalidation happens inside the same local activity (one source round trip, each source
within its own timeout). Checks that missed the deadline come back in `background`: each becomes a
RevalidateWorkflow child with ParentClosePolicy.ABANDON, so it outlives the read and updates the record.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

from memwarden.records import RetrieveInput, RetrieveResult, RevalidateInput
from memwarden.temporal.names import REVALIDATE_WORKFLOW, SEARCH_MEMORIES, revalidate_workflow_id

SEARCH_RETRY = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(milliseconds=100))


async def start_background_revalidation(request: RevalidateInput) -> bool:
    """Start one RevalidateWorkflow as an abandoned child, so it outlives the read that started it.

    By name, not by class: importing `workflows.revalidate` here would make the sandbox re-import its
    three workflow definitions on every search. Waits until the child has started (the parent may close
    right after). False when one already runs for that memory: concurrent reads that all missed the
    deadline share it.
    """
    try:
        await workflow.start_child_workflow(
            REVALIDATE_WORKFLOW,
            request,
            id=revalidate_workflow_id(request.memory_id),
            id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
            parent_close_policy=ParentClosePolicy.ABANDON,
        )
    except WorkflowAlreadyStartedError:
        return False
    return True


@workflow.defn(name="RetrieveWorkflow")
class RetrieveWorkflow:
    @workflow.run
    async def run(self, request: RetrieveInput) -> RetrieveResult:
        result: RetrieveResult = await workflow.execute_local_activity(
            SEARCH_MEMORIES,
            request,
            result_type=RetrieveResult,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=SEARCH_RETRY,
        )
        if result.background:
            await asyncio.gather(*(start_background_revalidation(r) for r in result.background))
        return result
