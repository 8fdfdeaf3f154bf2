"""Remediation's activities: the Temporal adapters of `memwarden.services.remediation.RemediationService`.

A restore, an apply and a check may run long (a large rollback, a slow replica): they heartbeat while
they run, so a killed worker is noticed in seconds, not at the timeout. `RollbackMissing` and
`UnknownSink` propagate as raised; the rollback workflow's retry policy names them non-retryable.
"""

from __future__ import annotations

from temporalio import activity

from activities.forget import heartbeating
from activities.run import current_run
from memwarden.records import (
    RevertInput,
    RevertResult,
    RollbackInput,
    RollbackPlan,
    RollbackResult,
    RollbackTask,
    SinkEvidence,
)
from memwarden.services.deps import Deps
from memwarden.services.remediation import RemediationService
from memwarden.temporal.names import (
    REVERT_MEMORY,
    ROLLBACK_APPLY,
    ROLLBACK_FINISH,
    ROLLBACK_RESTORE,
    ROLLBACK_VERIFY,
)


class RemediationActivities:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.service = RemediationService(deps)

    @activity.defn(name=REVERT_MEMORY)
    async def revert_memory(self, request: RevertInput) -> RevertResult:
        """Undo one supersession, or release one quarantined write."""
        return await self.service.revert(request, current_run(self.deps))

    @activity.defn(name=ROLLBACK_RESTORE)
    async def rollback_restore(self, request: RollbackInput) -> RollbackPlan:
        async with heartbeating():
            return await self.service.restore(request)

    @activity.defn(name=ROLLBACK_APPLY)
    async def rollback_apply(self, task: RollbackTask) -> int:
        async with heartbeating():
            return await self.service.apply(task, current_run(self.deps))

    @activity.defn(name=ROLLBACK_VERIFY)
    async def rollback_verify(self, task: RollbackTask) -> SinkEvidence:
        async with heartbeating():
            return await self.service.verify(task)

    @activity.defn(name=ROLLBACK_FINISH)
    async def rollback_finish(self, request: RollbackInput) -> RollbackResult:
        return await self.service.finish(request)

    def all(self) -> list[object]:
        return [
            self.revert_memory,
            self.rollback_restore,
            self.rollback_apply,
            self.rollback_verify,
            self.rollback_finish,
        ]
