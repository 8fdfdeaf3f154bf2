"""Retrieve's activity and the index's health: the Temporal adapters of `memwarden.services.retrieve`.

`CandidateGone` (the query's claim check or the subject handle expired) propagates as it is raised:
the workflow's retry policy decides on it by its type name.
"""

from __future__ import annotations

from temporalio import activity

from activities.run import current_run
from memwarden.records import RetrieveInput, RetrieveResult
from memwarden.services.deps import Deps
from memwarden.services.indexing import index_health
from memwarden.services.retrieve import RetrieveService
from memwarden.temporal.names import INDEX_HEALTH, SEARCH_MEMORIES


class MemoryActivities:
    """Bound to one worker's Deps; registered by method."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.service = RetrieveService(deps)

    @activity.defn(name=SEARCH_MEMORIES)
    async def search_memories(self, request: RetrieveInput) -> RetrieveResult:
        """Authorize before rank, re-check in the store, rank, revalidate at read (`RetrieveService.search`).

        Returns ids and scores only; content stays in the store (the API loads it after its own check).
        """
        return await self.service.search(request, current_run(self.deps))

    @activity.defn(name=INDEX_HEALTH)
    async def index_health(self) -> bool:
        return await index_health(self.deps)

    def all(self) -> list[object]:
        return [self.search_memories, self.index_health]
