"""Bulk import's activities: the Temporal adapters of `memwarden.services.imports.ImportService`'s `batch`
and `conversation_line`.

It heartbeats while a batch runs (so a killed worker's batch is retried elsewhere after the heartbeat
timeout), passes its run for the audit ids, and turns `ImportGone` into the non-retryable
`ApplicationError` of the same type name.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from temporalio import activity

from activities.errors import non_retryable_if_gone
from activities.remember import RememberActivities
from activities.run import current_run
from memwarden.policy.imports import ConversationLineDone, ImportBatch, ImportBatchResult, LineDecided
from memwarden.services.deps import Deps
from memwarden.services.imports import ImportService
from memwarden.temporal.names import IMPORT_BATCH, IMPORT_CONVERSATION_LINE

HEARTBEAT_EVERY_S = 2.0


@asynccontextmanager
async def heartbeating(every: float = HEARTBEAT_EVERY_S) -> AsyncIterator[None]:
    """Heartbeat while a batch runs, so a killed worker's batch is retried after the heartbeat timeout."""

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(every)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()


class ImportActivities:
    """Bound to one worker's Deps and its RememberActivities' service (the gate's code and vector cache)."""

    def __init__(self, deps: Deps, remember: RememberActivities) -> None:
        self.deps = deps
        self.service = ImportService(deps, remember.service)

    @activity.defn(name=IMPORT_BATCH)
    async def import_batch(self, job: ImportBatch) -> ImportBatchResult:
        """Decide and commit up to `job.limit` parked lines from `job.position` (`ImportService.batch`)."""
        async with heartbeating():
            return await non_retryable_if_gone(self.service.batch(job, current_run(self.deps)))

    @activity.defn(name=IMPORT_CONVERSATION_LINE)
    async def import_conversation_line(self, done: ConversationLineDone) -> LineDecided:
        """Record a conversation line's outcome after its ConversationWorkflow (`ImportService.conversation_line`)."""
        return await non_retryable_if_gone(self.service.conversation_line(done))

    def all(self) -> list[object]:
        return [self.import_batch, self.import_conversation_line]
