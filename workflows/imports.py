"""ImportWorkflow: a bulk import's lines pass the write gate in batches, resumably, each line once.

The lines wait in the store (`import_lines`, parked by the API): history holds the import's id, its
position and counts, never a line. Each `import_batch` activity decides the next batch and commits its
effects and per-line outcomes in one transaction, so a batch retried after a crash (the worker killed
half way) skips what landed and applies nothing twice. PENDING lines open their confirmation window as
RememberWorkflow's do (an abandoned PendingWriteWorkflow each). After `BATCHES_PER_RUN` batches the run
continues as new with its position, so history stays bounded however long the file.

A conversation line runs as a ConversationWorkflow child, exactly the run `POST /v1/conversations` starts
for the same conversation (its id derived from the conversation, so a repeat stores nothing twice), one
at a time in line order; then `import_conversation_line` records the line's outcome. Runs started before
the `import-conversation-lines` patch keep their commands (docs/decisions/workflow-versioning.md): their
batches report a conversation line `unsupported_line_kind`, as they did.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import ChildWorkflowError, WorkflowAlreadyStartedError
from temporalio.workflow import ParentClosePolicy

from memwarden.policy.imports import (
    BATCHES_PER_RUN,
    ConversationLineDone,
    ImportBatch,
    ImportBatchResult,
    ImportConversation,
    ImportInput,
    ImportResult,
    LineDecided,
    add_counts,
)
from memwarden.records import ConversationResult
from memwarden.temporal.names import CONVERSATION_WORKFLOW, IMPORT_BATCH, IMPORT_CONVERSATION_LINE, pending_workflow_id
from workflows.pending import PendingWriteWorkflow

BATCH_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=500),
    maximum_interval=timedelta(seconds=30),
    non_retryable_error_types=["ImportGone"],
)
"""Unbounded attempts: a batch that cannot finish (the store down) waits, it never drops lines."""


CONVERSATION_LINES = "import-conversation-lines"
"""The patch that runs conversation lines (docs/decisions/workflow-versioning.md)."""
BUSY_ATTEMPTS = 60
BUSY_WAIT = timedelta(seconds=10)
"""A conversation already being decided elsewhere is waited for this long, at most BUSY_ATTEMPTS times;
then its line is `ERROR conversation_in_progress` and the import goes on."""


def import_workflow_id(import_id: str) -> str:
    return f"import-{import_id}"


@workflow.defn(name="ImportWorkflow")
class ImportWorkflow:
    @workflow.run
    async def run(self, job: ImportInput) -> ImportResult:
        job = ImportInput.model_validate(job)
        conversations = workflow.patched(CONVERSATION_LINES)
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
                    conversations=conversations,
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
            if conversations and batch.conversation is not None:
                counts = add_counts(counts, {await self._conversation(job, batch.conversation): 1})
            if batch.done:
                return ImportResult(import_id=job.import_id, total_lines=job.total_lines, counts=counts)
        workflow.continue_as_new(job.model_copy(update={"position": position, "counts": counts}))

    async def _conversation(self, job: ImportInput, line: ImportConversation) -> str:
        """Run the line's ConversationWorkflow, then record the line's outcome; returns its decision."""
        result: ConversationResult | None = None
        failure: str | None = "conversation_in_progress"
        for _ in range(BUSY_ATTEMPTS):
            try:
                result = await workflow.execute_child_workflow(
                    CONVERSATION_WORKFLOW,  # by name: importing workflows.conversation would cost every run's sandbox
                    args=[line.request, job.policy],
                    id=line.workflow_id,
                    result_type=ConversationResult,
                    # A closed run of the same conversation (sent before, or on another line) is run again:
                    # its stored candidates come back `replayed`, so nothing is stored twice.
                    id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                )
                failure = None
                break
            except WorkflowAlreadyStartedError:
                # The same conversation is being decided right now (sent to /v1/conversations meanwhile): wait.
                await workflow.sleep(BUSY_WAIT)
            except ChildWorkflowError:
                failure = "conversation_failed"
                break
        decided = await workflow.execute_activity(
            IMPORT_CONVERSATION_LINE,
            ConversationLineDone(
                import_id=job.import_id,
                tenant_id=job.tenant_id,
                line_no=line.line_no,
                result=result,
                failure=failure,
            ),
            result_type=LineDecided,
            start_to_close_timeout=timedelta(minutes=1),
            retry_policy=BATCH_RETRY,
        )
        return decided.decision
