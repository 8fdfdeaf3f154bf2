"""ImportWorkflow: a bulk import's lines pass the write gate in batches, resumably, each line once.

The lines wait in the store (`import_lines`, parked by the API): history holds the import's id, its
position and counts, never a line. Each `import_batch` activity decides the next batch and commits its
effects and per-line outcomes in one transaction, so a batch retried after a crash (the worker killed
half way) skips what landed and applies nothing twice. PENDING lines open their confirmation window as
RememberWorkflow's do (an abandoned PendingWriteWorkflow each). After `BATCHES_PER_RUN` batches the run
continues as new with its position, so history stays bounded however long the file.

One body, no version branches: an incompatible change follows docs/decisions/workflow-versioning.md.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

from memwarden.policy.imports import (
    BATCHES_PER_RUN,
    ImportBatch,
    ImportBatchResult,
    ImportInput,
    ImportResult,
    add_counts,
)
from memwarden.temporal.names import IMPORT_BATCH, pending_workflow_id
from workflows.pending import PendingWriteWorkflow

BATCH_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    maximum_interval=timedelta(seconds=30),
    non_retryable_error_types=["ImportGone"],
)
"""Unbounded attempts: a batch that cannot finish (the store down) waits, it never drops lines."""


def import_workflow_id(import_id: str) -> str:
    return f"import-{import_id}"


@workflow.defn(name="ImportWorkflow")
class ImportWorkflow:
    @workflow.run
    async def run(self, job: ImportInput) -> ImportResult:
        job = ImportInput.model_validate(job)
        position, counts = job.position, dict(job.counts)
        for _ in range(BATCHES_PER_RUN):
            batch = await workflow.execute_activity(
                IMPORT_BATCH,
                ImportBatch(
                    import_id=job.import_id,
                    tenant_id=job.tenant_id,
                    position=position,
                    limit=job.batch_size,
                    policy=job.policy,
                ),
                result_type=ImportBatchResult,
                start_to_close_timeout=timedelta(minutes=10),
                # A killed worker's batch is retried elsewhere after this, not after the start-to-close.
                heartbeat_timeout=timedelta(seconds=job.heartbeat_seconds),
                retry_policy=BATCH_RETRY,
            )
            for pending in batch.pending:
                try:
                    await workflow.start_child_workflow(
                        PendingWriteWorkflow.run,
                        pending,
                        id=pending_workflow_id(pending.commit.candidate.memory_id),
                        parent_close_policy=ParentClosePolicy.ABANDON,
                    )
                except WorkflowAlreadyStartedError:
                    pass  # opened by an earlier run of this import: one window per staged line
            position, counts = batch.next_position, add_counts(counts, batch.counts)
            if batch.done:
                return ImportResult(import_id=job.import_id, total_lines=job.total_lines, counts=counts)
        workflow.continue_as_new(job.model_copy(update={"position": position, "counts": counts}))
