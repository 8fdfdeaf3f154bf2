"""SummarizeWorkflow's activity: the adapter of `memwarden.services.summaries.SummaryService`."""

from __future__ import annotations

from temporalio import activity

from activities.run import current_run
from memwarden.records import SummarizeInput, SummarizeResult
from memwarden.services.deps import Deps
from memwarden.services.summaries import SummaryService
from memwarden.temporal.names import SUMMARIZE_OWNER


class SummaryActivities:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.service = SummaryService(deps)

    @activity.defn(name=SUMMARIZE_OWNER)
    async def summarize_owner(self, request: SummarizeInput) -> SummarizeResult:
        """Idempotent (the summary's id is a function of its sources); a gone handle summarizes nothing."""
        return await self.service.summarize(request, current_run(self.deps))

    def all(self) -> list[object]:
        return [self.summarize_owner]
