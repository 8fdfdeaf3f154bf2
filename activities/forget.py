"""Forget's activities: the Temporal adapters of `memwarden.services.forget.ForgetService`.

A purge and a verification may run long (a large lineage, a slow replica): both heartbeat while they
run, so a killed worker is noticed in seconds, not at the timeout. `DeletionMissing` and `UnknownSink`
propagate as raised; the forget workflow's retry policy names them non-retryable.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from temporalio import activity

from activities.run import current_run
from memwarden.records import ForgetInput, ForgetPlan, ForgetResult, SinkEvidence, SinkTask
from memwarden.services.deps import Deps
from memwarden.services.forget import ForgetService
from memwarden.temporal.names import FORGET_FINISH, FORGET_PLAN, FORGET_PURGE, FORGET_VERIFY

HEARTBEAT_SECONDS = 2.0


@contextlib.asynccontextmanager
async def heartbeating() -> AsyncIterator[None]:
    """Heartbeat while a long step runs."""

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(HEARTBEAT_SECONDS)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class ForgetActivities:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.service = ForgetService(deps)

    @activity.defn(name=FORGET_PLAN)
    async def forget_plan(self, request: ForgetInput) -> ForgetPlan:
        """Mark the deletion `purging` and name the sinks to fan out to (this worker's configuration)."""
        return await self.service.plan(request)

    @activity.defn(name=FORGET_PURGE)
    async def forget_purge(self, task: SinkTask) -> int:
        async with heartbeating():
            return await self.service.purge(task, current_run(self.deps))

    @activity.defn(name=FORGET_VERIFY)
    async def forget_verify(self, task: SinkTask) -> SinkEvidence:
        async with heartbeating():
            return await self.service.verify(task)

    @activity.defn(name=FORGET_FINISH)
    async def forget_finish(self, request: ForgetInput) -> ForgetResult:
        """Every sink verified: build the receipt, chain it into the audit log, mark members purged."""
        return await self.service.finish(request)

    def all(self) -> list[object]:
        return [self.forget_plan, self.forget_purge, self.forget_verify, self.forget_finish]
