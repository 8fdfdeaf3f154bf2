"""Replicate's activity: the adapter of `memwarden.services.replicas.replicate`."""

from __future__ import annotations

from temporalio import activity

from memwarden.services.deps import Deps
from memwarden.services.replicas import replicate
from memwarden.temporal.names import REPLICATE_MEMORY


class ReplicaActivities:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    @activity.defn(name=REPLICATE_MEMORY)
    async def replicate_memory(self, tenant_id: str, memory_id: str) -> int:
        return await replicate(self.deps, tenant_id, memory_id)

    def all(self) -> list[object]:
        return [self.replicate_memory]
