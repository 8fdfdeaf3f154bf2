"""ConversationWorkflow: a conversation handed over becomes candidate memories, each judged by the gate.

The messages are parked by the caller (memwarden.services.conversations); history holds their claim-check
ref, never their text. One activity extracts (`extract_conversation`: reads the conversation, runs the
extractor, parks each candidate's content) and returns sealed RememberInputs. Each candidate then goes
through the write gate as its own RememberWorkflow child (`remember-<memory_id>`), exactly as a single
`POST /v1/memories` does, so every decision is audited as today. The memory ids are derived from the
session, the turn and the candidate's index: the same turn sent again names the same children and the
same rows, and a candidate whose row already exists is answered from it without a child.

Candidates are decided in message order (a correction after the statement it corrects); with a
concurrency above 1, a batch never holds two candidates of one slot. Then the session's near-duplicate
episodes are consolidated into its summary, and the parked conversation is dropped (however the run ends).

Startable as a child workflow with the same input (a bulk import runs one per conversation).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from memwarden.policy.gate import DEFAULT_POLICY, GatePolicy
from memwarden.records import (
    CandidateOutcome,
    ConsolidateInput,
    ConsolidateResult,
    ConversationInput,
    ConversationResult,
    Decision,
    ExtractedCandidate,
    Extraction,
    MemoryType,
    RememberResult,
)
from memwarden.temporal.names import CONSOLIDATE_SESSION, EXTRACT_CONVERSATION, RELEASE_CONVERSATION
from workflows.remember import RememberWorkflow

ACTIVITY_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=10,
    non_retryable_error_types=["CandidateGone"],
)


def remember_workflow_id(memory_id: str) -> str:
    return f"remember-{memory_id}"


def batches(candidates: list[tuple[int, ExtractedCandidate]], size: int) -> list[list[tuple[int, ExtractedCandidate]]]:
    """Consecutive runs of at most `size`, cut before a slot repeats: one slot's values are decided in order."""
    out: list[list[tuple[int, ExtractedCandidate]]] = []
    current: list[tuple[int, ExtractedCandidate]] = []
    slots: set[str] = set()
    for item in candidates:
        slot = item[1].candidate.slot
        if current and (len(current) >= size or (slot is not None and slot in slots)):
            out.append(current)
            current, slots = [], set()
        current.append(item)
        if slot is not None:
            slots.add(slot)
    if current:
        out.append(current)
    return out


@workflow.defn(name="ConversationWorkflow")
class ConversationWorkflow:
    @workflow.run
    async def run(self, request: ConversationInput, policy: GatePolicy | None = None) -> ConversationResult:
        request = ConversationInput.model_validate(request)
        try:
            return await self._run(request, policy or DEFAULT_POLICY)
        finally:
            # The parked messages leave the store however the run ends (a failed run is sent again whole).
            await workflow.execute_activity(
                RELEASE_CONVERSATION,
                request.conversation_ref,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=ACTIVITY_RETRY,
            )

    async def _run(self, request: ConversationInput, policy: GatePolicy) -> ConversationResult:
        extraction = await workflow.execute_activity(
            EXTRACT_CONVERSATION,
            request,
            result_type=Extraction,
            start_to_close_timeout=timedelta(minutes=5),
            retry_policy=ACTIVITY_RETRY,
        )
        results: dict[int, tuple[RememberResult, str | None]] = {}
        todo: list[tuple[int, ExtractedCandidate]] = []
        for i, c in enumerate(extraction.candidates):
            if c.known is not None:
                results[i] = (c.known, None)
            else:
                todo.append((i, c))
        for batch in batches(todo, request.concurrency):
            answers = await asyncio.gather(*(self._remember(c, policy) for _, c in batch))
            for (i, _), answer in zip(batch, answers, strict=True):
                results[i] = answer
        outcomes = []
        for i, c in enumerate(extraction.candidates):
            result, workflow_id = results[i]
            outcomes.append(
                CandidateOutcome(
                    message_index=c.message_index,
                    turn_id=c.turn_id,
                    kind=c.kind,
                    type=c.candidate.type,
                    decision=result.decision,
                    reason=result.reason,
                    memory_id=result.memory_id,
                    supersedes=result.supersedes,
                    workflow_id=workflow_id,
                )
            )
        written = [
            o.memory_id
            for o in outcomes
            if o.type is MemoryType.EPISODIC and o.decision in (Decision.ADD, Decision.UPDATE) and o.memory_id
        ]
        summary = ConsolidateResult()
        if written:
            summary = await workflow.execute_activity(
                CONSOLIDATE_SESSION,
                ConsolidateInput(
                    tenant_id=request.tenant_id,
                    subject_ref=request.subject_ref,
                    conversation_ref=request.conversation_ref,
                    session_key=request.session_key,
                    actor=request.actor,
                    memory_ids=written,
                ),
                result_type=ConsolidateResult,
                start_to_close_timeout=timedelta(minutes=2),
                retry_policy=ACTIVITY_RETRY,
            )
        return ConversationResult(
            outcomes=outcomes,
            extractor=extraction.extractor,
            summary_id=summary.summary_id,
            summary_derived_from=summary.derived_from,
        )

    async def _remember(self, c: ExtractedCandidate, policy: GatePolicy) -> tuple[RememberResult, str | None]:
        """One candidate through the gate as its own RememberWorkflow (same id for the same turn and index)."""
        workflow_id = remember_workflow_id(c.candidate.memory_id)
        try:
            result = await workflow.execute_child_workflow(
                RememberWorkflow.run,
                args=[c.candidate, policy],
                id=workflow_id,
                result_type=RememberResult,
                # A REJECT or NOOP leaves no row: the same turn sent again is judged again (and audited again),
                # which stores nothing either way.
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                execution_timeout=timedelta(minutes=10),
            )
        except WorkflowAlreadyStartedError:
            # Another send of this turn is deciding it right now; its own answer tells the outcome.
            result = RememberResult(decision=Decision.NOOP, reason="in_progress", memory_id=c.candidate.memory_id)
        return result, workflow_id
