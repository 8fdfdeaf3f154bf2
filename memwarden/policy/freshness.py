"""How fresh a returned memory is, as the read sees it now.

Retrieve knows two answers of its own: `stale` (the store marked it so: a source changed or its
freshness window passed) and `fresh`. Read-time revalidation (the Revalidate issue) adds
`verified` and `unverified`; it replaces this function's answer, it does not change it.
"""

from __future__ import annotations

from memwarden.records import Freshness, MemoryRecord, Status


def read_freshness(record: MemoryRecord) -> Freshness:
    """`stale` for a memory the store holds as stale, `fresh` for an active one."""
    return Freshness.STALE if record.status is Status.STALE else Freshness.FRESH
