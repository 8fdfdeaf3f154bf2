"""RememberWorkflow: a candidate becomes durable memory only through this workflow.

The candidate's content never enters history: the API parks it in the store's claim-check table and
the workflow passes the reference. One local activity (`remember_candidate`) screens it (detectors,
the owner's switch, the cited source's quarantine, the nearest live memory, the slot's holder), runs
the pure gate (`gate.decide`) and commits, stages or records the decision; the workflow records the
decision and its outcome (codes and ids) from the activity's marker. So a proposal is one workflow task
and one local activity when eagerly started. A PENDING write starts a PendingWriteWorkflow (abandoned
child) that waits for confirmation, and the proposer gets its answer at once.

Versions: runs started with `branch=ONE_STEP_BRANCH` (today's API) take the single step at once,
with no patch call: the starter chose the version, and the start event records the choice. Runs
started before the field follow their `workflow.patched` markers, so each replays down its own
branch: before GATE_PATCH one ungated commit; GATE_PATCH alone, the two-step gate (screen, decide in
the workflow, then commit/stage/record); ONE_STEP_PATCH as well, the single step.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TypeVar

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.workflow import ParentClosePolicy

with workflow.unsafe.imports_passed_through():
    from memwarden.policy.gate import DEFAULT_POLICY, GatePolicy, Remembered, Screened, commit_input, decide
    from memwarden.records import CommitInput, Decision, PendingWrite, RememberInput, RememberResult
    from workflows.names import (
        COMMIT_GATED,
        COMMIT_MEMORY,
        RECORD_DECISION,
        REMEMBER_CANDIDATE,
        SCREEN_CANDIDATE,
        STAGE_MEMORY,
    )
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
ONE_STEP_PATCH = "remember-one-step"
"""Runs recorded before it took two local activities (screen, then commit/stage/record) around a decision
made in the workflow; they replay down that branch."""
ONE_STEP_BRANCH = "one-step"
"""`RememberInput.branch` of runs that take the single step without asking `workflow.patched` (whose
marker and search-attribute upsert cost each new run ~2.7 ms for the two patches, measured)."""


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


@workflow.defn(name="RememberWorkflow")
class RememberWorkflow:
    @workflow.run
    async def run(self, candidate: RememberInput, policy: GatePolicy | None = None) -> RememberResult:
        # The SDK applies type hints only when every parameter has a payload: started with the candidate
        # alone (as runs before the gate were), it arrives as a plain dict.
        candidate = RememberInput.model_validate(candidate)
        if candidate.branch == ONE_STEP_BRANCH:
            return await self._one_step(candidate, policy or DEFAULT_POLICY)
        if not workflow.patched(GATE_PATCH):
            return await _local(COMMIT_MEMORY, candidate, result_type=RememberResult)
        policy = policy or DEFAULT_POLICY
        if workflow.patched(ONE_STEP_PATCH):
            return await self._one_step(candidate, policy)
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
            await self._start_confirmation_window(
                candidate, commit, policy, Remembered(decision=decision, result=staged)
            )
            return staged.model_copy(update={"supersedes": decision.supersedes})
        return await _local(COMMIT_GATED, commit, result_type=RememberResult)

    async def _one_step(self, candidate: RememberInput, policy: GatePolicy) -> RememberResult:
        """Screen, decide and commit/stage/record in one local activity; a PENDING write's window follows."""
        done = await _local(REMEMBER_CANDIDATE, candidate, policy, result_type=Remembered)
        if done.decision.decision is Decision.PENDING:
            await self._start_confirmation_window(candidate, commit_input(candidate, done.decision), policy, done)
        return done.result

    @staticmethod
    async def _start_confirmation_window(
        candidate: RememberInput, commit: CommitInput, policy: GatePolicy, staged: Remembered
    ) -> None:
        """Start the staged write's confirmation window: an abandoned child, so the proposer is answered now."""
        await workflow.start_child_workflow(
            PendingWriteWorkflow.run,
            PendingWrite(
                commit=commit,
                window_seconds=policy.confirmation_window_seconds,
                stage_reason=staged.decision.reason.value,
            ),
            id=pending_workflow_id(candidate.memory_id),
            parent_close_policy=ParentClosePolicy.ABANDON,
        )
