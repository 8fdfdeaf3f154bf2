"""Revalidate: is this remembered fact still true at its source?

- RevalidateWorkflow: one memory, checked at its system of record and the answer applied (unchanged,
  changed -> superseded, gone -> invalidated, unavailable -> nothing changed, recorded). While the
  source stays unavailable it tries again on a doubling durable timer, up to `max_attempts`. Started by
  Retrieve when a read's deadline passed (an abandoned child that outlives the read), by
  InvalidateWorkflow for each dependent of a changed record, and by the periodic sweep.
- InvalidateWorkflow: one per (tenant, source, record key hash), fed by signal-with-start from
  `POST /v1/events`, so a burst of events for one record coalesces into one workflow and one
  revalidation pass per quiet window. The API has already marked the dependents stale or invalidated.
- PeriodicRevalidationWorkflow: run by a Temporal Schedule; re-checks volatile memories.

Ids and codes only in history: the record key is hashed, values never leave the activities.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

from memwarden.records import (
    InvalidateInput,
    InvalidateResult,
    RevalidateInput,
    RevalidateResult,
    RevalidationOutcome,
    SourceChange,
    SourceEvent,
)
from memwarden.temporal.names import PERIODIC_REVALIDATION_PLAN, REVALIDATE_MEMORY

CHECK_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=30), maximum_attempts=10
)
"""Retries of the activity itself (a worker crash, the store busy); a source that is down is an answer, not an error."""
MAX_RETRY_SECONDS = 300.0
PERIODIC_CONCURRENCY = 8
SOURCE_EVENT_SIGNAL = "source_event"
EVENTS_BEFORE_CONTINUE = 500


@workflow.defn(name="RevalidateWorkflow")
class RevalidateWorkflow:
    @workflow.run
    async def run(self, request: RevalidateInput) -> RevalidateResult:
        delay = max(request.retry_seconds, 0.001)
        attempt = 1
        while True:
            result: RevalidateResult = await workflow.execute_activity(
                REVALIDATE_MEMORY,
                args=[request, attempt],
                result_type=RevalidateResult,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=CHECK_RETRY,
            )
            if result.outcome is not RevalidationOutcome.UNAVAILABLE or attempt >= request.max_attempts:
                return result
            await workflow.sleep(timedelta(seconds=delay))
            delay = min(delay * 2, MAX_RETRY_SECONDS)
            attempt += 1


@workflow.defn(name="InvalidateWorkflow")
class InvalidateWorkflow:
    def __init__(self) -> None:
        self._pending: list[SourceEvent] = []

    @workflow.signal(name=SOURCE_EVENT_SIGNAL)
    def source_event(self, event: SourceEvent) -> None:
        self._pending.append(event)

    @workflow.run
    async def run(
        self, request: InvalidateInput, coalesce_seconds: float = 0.5, quiet_seconds: float = 5.0, max_attempts: int = 6
    ) -> InvalidateResult:
        totals = InvalidateResult(events=0, stale=0, invalidated=0, revalidated=0)
        while True:
            try:
                await workflow.wait_condition(lambda: bool(self._pending), timeout=timedelta(seconds=quiet_seconds))
            except TimeoutError:
                if not self._pending:
                    return totals
            if coalesce_seconds > 0:
                await workflow.sleep(timedelta(seconds=coalesce_seconds))  # let the rest of a burst arrive
            batch, self._pending = self._pending, []
            deleted = {i for e in batch if e.change is SourceChange.DELETED for i in e.memory_ids}
            stale = sorted({i for e in batch if e.change is SourceChange.CHANGED for i in e.memory_ids} - deleted)
            totals = totals.model_copy(
                update={
                    "events": totals.events + len(batch),
                    "stale": totals.stale + len(stale),
                    "invalidated": totals.invalidated + len(deleted),
                }
            )
            # Latest-only: a burst of changes to one record is one check of each dependent.
            results = await asyncio.gather(
                *(
                    workflow.execute_child_workflow(
                        RevalidateWorkflow.run,
                        RevalidateInput(
                            tenant_id=request.tenant_id, memory_id=i, trigger="event", max_attempts=max_attempts
                        ),
                        id=f"{workflow.info().workflow_id}-{totals.events}-{i}"[:200],
                        result_type=RevalidateResult,
                    )
                    for i in stale
                )
            )
            totals = totals.model_copy(update={"revalidated": totals.revalidated + len(results)})
            if totals.events >= EVENTS_BEFORE_CONTINUE or workflow.info().is_continue_as_new_suggested():
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(args=[request, coalesce_seconds, quiet_seconds, max_attempts])


@workflow.defn(name="PeriodicRevalidationWorkflow")
class PeriodicRevalidationWorkflow:
    """Run by the revalidation Schedule: re-check volatile source-backed memories, a bounded batch per run."""

    @workflow.run
    async def run(self) -> int:
        plan: list[RevalidateInput] = await workflow.execute_activity(
            PERIODIC_REVALIDATION_PLAN,
            result_type=list[RevalidateInput],
            start_to_close_timeout=timedelta(minutes=1),
            retry_policy=CHECK_RETRY,
        )
        checked = 0
        for start in range(0, len(plan), PERIODIC_CONCURRENCY):
            chunk = plan[start : start + PERIODIC_CONCURRENCY]
            await asyncio.gather(
                *(
                    workflow.execute_activity(
                        REVALIDATE_MEMORY,
                        args=[r, 1],
                        result_type=RevalidateResult,
                        start_to_close_timeout=timedelta(seconds=30),
                        retry_policy=CHECK_RETRY,
                    )
                    for r in chunk
                )
            )
            checked += len(chunk)
        return checked
