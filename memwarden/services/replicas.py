"""Replication of committed memories: one idempotent function, called once per commit.

The commit paths (remember's go-live, revalidation's apply) call `replicate(deps, tenant_id, memory_id)`
right after the index upsert and cache invalidation (commit order: store, index, cache, replicas), for
the new memory and the one it superseded. It re-reads the durable store, so a memory tombstoned
meanwhile is never copied, and each replica refuses to overwrite a tombstone.
"""

from __future__ import annotations

from memwarden.records import FORGOTTEN_STATUSES, Status
from memwarden.services.deps import Deps

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
