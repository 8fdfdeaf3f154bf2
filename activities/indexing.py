"""How a durable record becomes an index point: filter payload plus vectors, never content as payload."""

from __future__ import annotations

from memwarden.records import IndexPoint, MemoryRecord, sensitivity_rank


def index_point(record: MemoryRecord, dense: list[float]) -> IndexPoint:
    """The index's view of a record: filter payload plus vectors, never the content as payload."""
    assert record.content is not None
    return IndexPoint(
        memory_id=record.id,
        tenant_id=record.tenant_id,
        owner_id=record.owner_id,
        scope=record.scope,
        agent_id=record.agent_id,
        store=record.store,
        type=record.type,
        status=record.status,
        sensitivity_rank=sensitivity_rank(record.sensitivity),
        expires_at_ts=record.expires_at.timestamp() if record.expires_at else None,
        created_at_ts=record.created_at.timestamp(),
        importance=record.importance,
        dense=dense,
        text=record.content,
    )
