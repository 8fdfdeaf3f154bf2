"""RetentionWorkflow's activity: the adapter of `memwarden.services.retention.RetentionService`."""

from __future__ import annotations

from temporalio import activity

from memwarden.records import RetentionPlan
from memwarden.services.deps import Deps
from memwarden.services.retention import RetentionService
from memwarden.temporal.names import RETENTION_PLAN


class RetentionActivities:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.service = RetentionService(deps)

    @activity.defn(name=RETENTION_PLAN)
    async def retention_plan(self) -> RetentionPlan:
        """Idempotent: a retry finds the same memories already `expired` and answers the same deletions."""
        return await self.service.plan()

    def all(self) -> list[object]:
        return [self.retention_plan]
