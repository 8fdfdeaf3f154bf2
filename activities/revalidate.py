"""Revalidate's activities: the Temporal adapters of `memwarden.services.revalidate.RevalidateService`."""

from __future__ import annotations

from temporalio import activity

from activities.run import current_run
from memwarden.records import RevalidateInput, RevalidateResult
from memwarden.services.deps import Deps
from memwarden.services.revalidate import RevalidateService
from memwarden.temporal.names import PERIODIC_REVALIDATION_PLAN, REVALIDATE_MEMORY


class RevalidateActivities:
    """Bound to one worker's Deps; registered by method."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.service = RevalidateService(deps)

    @activity.defn(name=REVALIDATE_MEMORY)
    async def revalidate_memory(self, request: RevalidateInput, attempt: int) -> RevalidateResult:
        """One check of one memory at its source, applied (audit ids per run and attempt)."""
        return await self.service.revalidate(request, attempt, current_run(self.deps))

    @activity.defn(name=PERIODIC_REVALIDATION_PLAN)
    async def periodic_revalidation_plan(self) -> list[RevalidateInput]:
        """Volatile source-backed memories due for the periodic sweep, oldest first, bounded."""
        return await self.service.periodic_plan()

    def all(self) -> list[object]:
        return [self.revalidate_memory, self.periodic_revalidation_plan]
