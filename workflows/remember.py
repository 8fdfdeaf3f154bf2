"""RememberWorkflow: a candidate becomes durable memory only through this workflow.

The candidate's content never enters history: the API parks it in the store's claim-check table and
the workflow passes the reference. One local activity (`remember_candidate`) screens it (detectors,
the owner's switch, the cited source's quarantine, the nearest live memory, the slot's holder), runs
the pure gate (`gate.decide`) and commits, stages or records the decision; the workflow records the
decision and its outcome (codes and ids) from the activity's marker. So a proposal is one workflow task
and one local activity when eagerly started. A PENDING write starts a PendingWriteWorkflow (abandoned
child) that waits for confirmation, and the proposer gets its answer at once.

One body, no version branches: an incompatible change follows docs/decisions/workflow-versioning.md.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.workflow import ParentClosePolicy

from memwarden.policy.gate import DEFAULT_POLICY, GatePolicy, Remembered, commit_input
from memwarden.records import Decision, PendingWrite, RememberInput, RememberResult
from memwarden.temporal.names import PENDING_WRITE_WORKFLOW, REMEMBER_CANDIDATE, pending_workflow_id

# Bounded by attempts as well as by schedule-to-close: a local activity's deadline is measured on the
# worker's clock, attempts are not, so the bound holds under time skipping too (~3 min of backoff).
COMMIT_MAX_ATTEMPTS = 40
COMMIT_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=COMMIT_MAX_ATTEMPTS,
    non_retryable_error_types=["CandidateGone"],
)


@workflow.defn(name="RememberWorkflow")
class RememberWorkflow:
    @workflow.run
    async def run(self, candidate: RememberInput, policy: GatePolicy | None = None) -> RememberResult:
        """Screen, decide and commit/stage/record in one local activity; a PENDING write's window follows."""
        # The SDK applies type hints only when every parameter has a payload: started with the candidate
        # alone (the policy left to its default), it arrives as a plain dict.
        candidate = RememberInput.model_validate(candidate)
        policy = policy or DEFAULT_POLICY
        done = await workflow.execute_local_activity(
            REMEMBER_CANDIDATE,
            args=[candidate, policy],
            result_type=Remembered,
            start_to_close_timeout=timedelta(seconds=10),
            schedule_to_close_timeout=timedelta(minutes=5),
            retry_policy=COMMIT_RETRY,
            # Backoffs longer than this become workflow timers: durable, and skippable in tests.
            local_retry_threshold=timedelta(seconds=1),
        )
        if done.decision.decision is Decision.PENDING:
            # By name: importing workflows.pending would make the sandbox re-import it on every write.
            await workflow.start_child_workflow(
                PENDING_WRITE_WORKFLOW,
                PendingWrite(
                    commit=commit_input(candidate, done.decision),
                    window_seconds=policy.confirmation_window_seconds,
                    stage_reason=done.decision.reason.value,
                ),
                id=pending_workflow_id(candidate.memory_id),
                parent_close_policy=ParentClosePolicy.ABANDON,
            )
        return done.result
