"""RememberWorkflow: a candidate becomes durable memory only through this workflow.

The candidate's content never enters history: the API parks it in the store's claim-check table and
the workflow passes the reference. One local activity screens it (detectors, the owner's switch, the
nearest live memory, the slot's holder: codes and ids out), the pure gate decides, and one more local
activity commits, stages or records the decision, so a proposal costs one workflow task when eagerly
started. A PENDING write starts a PendingWriteWorkflow (abandoned child) that waits for confirmation,
and the proposer gets its answer at once.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from memwarden.policy.gate import DEFAULT_POLICY, GateDecision, GatePolicy, Screened, decide
    from memwarden.records import CommitInput, Decision, PendingWrite, RememberInput, RememberResult
    from workflows.names import COMMIT_GATED, COMMIT_MEMORY, RECORD_DECISION, SCREEN_CANDIDATE, STAGE_MEMORY
    from workflows.pending import PendingWriteWorkflow, pending_workflow_id

# Bounded by attempts as well as by schedule-to-close: a local activity's deadline is measured on the
# worker's clock, attempts are not, so the bound holds under time skipping too (~3 min of backoff).
COMMIT_MAX_ATTEMPTS = 40
COMMIT_RETRY = RetryPolicy(
    initial_interval=timedelta(milliseconds=200),
    maximum_interval=timedelta(seconds=5),
    maximum_attempts=COMMIT_MAX_ATTEMPTS,
    non_retryable_error_types=["CandidateGone"],
)

GATE_PATCH = "write-gate-v1"
"""Runs recorded before the write gate committed without screening; they replay down the old branch."""


T = TypeVar("T")


async def _local(activity: str, *args: object, result_type: type[T]) -> T:
    result: T = await workflow.execute_local_activity(
        activity,
        args=list(args),
        result_type=result_type,
        start_to_close_timeout=timedelta(seconds=10),
        schedule_to_close_timeout=timedelta(minutes=5),
        retry_policy=COMMIT_RETRY,
        # Backoffs longer than this become workflow timers: durable, and skippable in tests.
        local_retry_threshold=timedelta(seconds=1),
    )
    return result


def commit_input(candidate: RememberInput, decision: GateDecision) -> CommitInput:
    """The gate's adjustments that the commit applies (importance, redaction, lifetime, trust)."""
    assert decision.importance is not None
    return CommitInput(
        candidate=candidate,
        importance=decision.importance,
        reason=decision.reason.value,
        redact=decision.redact,
        ttl_seconds=decision.ttl_seconds,
        untrusted=decision.untrusted,
    )


@workflow.defn(name="RememberWorkflow")
class RememberWorkflow:
    @workflow.run
    async def run(self, candidate: RememberInput, policy: GatePolicy | None = None) -> RememberResult:
        # The SDK applies type hints only when every parameter has a payload: started with the candidate
        # alone (as runs before the gate were), it arrives as a plain dict.
        candidate = RememberInput.model_validate(candidate)
        if not workflow.patched(GATE_PATCH):
            return await _local(COMMIT_MEMORY, candidate, result_type=RememberResult)
        policy = policy or DEFAULT_POLICY
        screened = await _local(SCREEN_CANDIDATE, candidate, policy, result_type=Screened)
        decision = decide(screened.gate_input(candidate), screened.lookup, policy)
        if decision.decision in (Decision.REJECT, Decision.NOOP):
            answer = RememberResult(
                decision=decision.decision, reason=decision.reason.value, memory_id=decision.duplicate_of
            )
            return await _local(RECORD_DECISION, candidate, answer, result_type=RememberResult)
        commit = commit_input(candidate, decision)
        if decision.decision is Decision.PENDING:
            staged = await _local(STAGE_MEMORY, commit, result_type=RememberResult)
            await workflow.start_child_workflow(
                PendingWriteWorkflow.run,
                PendingWrite(
                    commit=commit,
                    window_seconds=policy.confirmation_window_seconds,
                    stage_reason=decision.reason.value,
                ),
                id=pending_workflow_id(candidate.memory_id),
                parent_close_policy=ParentClosePolicy.ABANDON,
            )
            return staged.model_copy(update={"supersedes": decision.supersedes})
        return await _local(COMMIT_GATED, commit, result_type=RememberResult)
