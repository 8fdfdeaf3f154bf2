"""What conversation extraction reads from the store besides claim checks: earlier task guidance, and a
session's episodic memories (for consolidation)."""

from __future__ import annotations

import sqlalchemy as sa

from memwarden.records import LIVE_STATUSES, MemoryRecord, MemoryType, Scope
from memwarden.stores.sql import SqlStore, _row_to_record
from memwarden.stores.sql_models import memories

GUIDANCE_SLOT_PREFIX = "task.guidance."
MAX_SESSION_EPISODES = 200


def guidance_slot(key: str, session_key: str) -> str:
    """One slot per (guidance topic, session): a repeat in the same session is a duplicate, in another a new row."""
    return f"{GUIDANCE_SLOT_PREFIX}{key}.{session_key[:16]}"


async def guidance_sessions(
    store: SqlStore, tenant_id: str, owner_id: str, scope: Scope, agent_id: str | None, store_name: str | None, key: str
) -> set[str]:
    """The sessions (by key) in which this namespace's task guidance on `key` was kept, whatever its status now:
    an expired task memory keeps its row and slot, so a repeat across weeks is still seen."""
    m = memories.c
    prefix = f"{GUIDANCE_SLOT_PREFIX}{key}."
    query = sa.select(m.slot).where(
        m.tenant_id == tenant_id,
        m.owner_id == owner_id,
        m.scope == scope.value,
        m.type == MemoryType.TASK.value,
        m.slot.like(prefix.replace("_", "\\_") + "%", escape="\\"),
    )
    query = query.where(m.agent_id == agent_id) if agent_id is not None else query.where(m.agent_id.is_(None))
    query = query.where(m.store == store_name) if store_name is not None else query.where(m.store.is_(None))
    async with store.engine.connect() as conn:
        slots = (await conn.execute(query.distinct())).scalars().all()
    return {str(s).removeprefix(prefix) for s in slots if s}


async def session_episodes(store: SqlStore, tenant_id: str, owner_id: str, session_id: str) -> list[MemoryRecord]:
    """The owner's live user-scope episodic memories written in this session, newest first."""
    m = memories.c
    async with store.engine.connect() as conn:
        rows = (
            await conn.execute(
                sa.select(memories)
                .where(
                    m.tenant_id == tenant_id,
                    m.owner_id == owner_id,
                    m.scope == Scope.USER.value,
                    m.type == MemoryType.EPISODIC.value,
                    m.status.in_(sorted(s.value for s in LIVE_STATUSES)),
                    m.content.is_not(None),
                )
                .order_by(m.created_at.desc(), m.id.desc())
                .limit(MAX_SESSION_EPISODES)
            )
        ).mappings()
        records = [_row_to_record(r) for r in rows]
    return [r for r in records if r.provenance.session == session_id]
