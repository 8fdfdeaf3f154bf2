"""Replication of committed memories: one idempotent activity (and function) per commit.

`RememberActivities._go_live` calls `replicate(deps, tenant_id, memory_id)` right after the index
upsert and cache invalidation (commit order: store, index, cache, replicas), for the new memory and
the one it superseded. It re-reads the durable store, so
a memory tombstoned meanwhile is never copied, and each replica refuses to overwrite a tombstone.
"""

from __future__ import annotations

from temporalio import activity

from memwarden.records import FORGOTTEN_STATUSES, Status
from memwarden.services.deps import Deps
from memwarden.temporal.names import REPLICATE_MEMORY

_NEVER = frozenset({Status.PENDING, *FORGOTTEN_STATUSES})


async def replicate(deps: Deps, tenant_id: str, memory_id: str) -> int:
    """Copy one committed memory (its current status included) to every configured replica.

    Returns how many replicas took it. Pending writes are never copied (not yet accepted), nor
    anything forgotten: the store is re-read here, so a tombstone always wins over a late copy.
    """
    if not deps.replicas:
        return 0
    record = await deps.store.get_memory(tenant_id, memory_id)
    if record is None or record.status in _NEVER or record.content is None:
        return 0
    copied = 0
    for replica in deps.replicas:
        copied += await replica.copy(record)
    return copied


class ReplicaActivities:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    @activity.defn(name=REPLICATE_MEMORY)
    async def replicate_memory(self, tenant_id: str, memory_id: str) -> int:
        return await replicate(self.deps, tenant_id, memory_id)

    def all(self) -> list[object]:
        return [self.replicate_memory]
