"""The store's hottest statements, built once with bind parameters instead of on every call.

Why: building a SQLAlchemy Core statement (`select().where()`, `insert().values()`, `on_conflict_...`)
and computing its cache key costs more than executing it on a local SQLite file. A statement built
once memoizes its cache key, so each execution only binds its parameters. These are the statements
every write and every search runs; the rest of the store builds its statements where it uses them.
"""

from __future__ import annotations

from functools import cache

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite

from memwarden.stores.sql_models import (
    audit_checkpoints,
    audit_events,
    candidates,
    memories,
    owner_settings,
    quarantined_sources,
)

_m, _c, _a = memories.c, candidates.c, audit_events.c

MEMORY_BY_ID = sa.select(memories).where(_m.tenant_id == sa.bindparam("tenant_id"), _m.id == sa.bindparam("id"))
MEMORY_BY_ID_OR_KEY = sa.select(memories).where(
    _m.tenant_id == sa.bindparam("tenant_id"),
    sa.or_(_m.id == sa.bindparam("id"), _m.idempotency_key == sa.bindparam("key")),
)
MEMORIES_BY_IDS = sa.select(memories).where(
    # `tenant_id || ''`: by primary key (see SqlStore.get_many)
    _m.tenant_id.concat("") == sa.bindparam("tenant_id"),
    _m.id.in_(sa.bindparam("ids", expanding=True)),
)
SLOT_HOLDER = sa.select(memories).where(
    _m.tenant_id == sa.bindparam("tenant_id"),
    _m.owner_id == sa.bindparam("owner_id"),
    _m.live_slot == sa.bindparam("live_slot"),
)
SLOT_HOLDER_FOR_UPDATE = SLOT_HOLDER.with_for_update()
"""The slot's holder, row-locked on PostgreSQL for the commit that supersedes it."""
INSERT_MEMORY = sa.insert(memories).returning(*memories.c)
"""Executed with the row's values as parameters."""

CANDIDATE_CONTENT = sa.select(_c.content).where(_c.ref == sa.bindparam("ref"), _c.expires_at > sa.bindparam("now"))
DELETE_CANDIDATE = sa.delete(candidates).where(_c.ref == sa.bindparam("ref"))

_s, _q = owner_settings.c, quarantined_sources.c


MEMORY_ENABLED = sa.select(_s.memory_enabled).where(
    _s.tenant_id == sa.bindparam("tenant_id"), _s.owner_id == sa.bindparam("owner_id")
)
"""The owner's switch (absent: on)."""


def _screen_inputs(with_source: bool) -> sa.Select[tuple[bool | None, str | None, bool]]:
    quarantined: sa.ColumnElement[bool] = sa.false()
    if with_source:
        quarantined = sa.exists().where(
            _q.tenant_id == sa.bindparam("tenant_id"),
            _q.system == sa.bindparam("system"),
            _q.key == sa.bindparam("key"),
        )
    return sa.select(
        MEMORY_ENABLED.scalar_subquery(),
        CANDIDATE_CONTENT.scalar_subquery(),
        quarantined,
    )


SCREEN_INPUTS = _screen_inputs(with_source=False)
SCREEN_INPUTS_WITH_SOURCE = _screen_inputs(with_source=True)
"""(memory on for the owner, the parked content, the cited source quarantined): SqlStore.screen_inputs."""

AUDIT_CHAIN_STATE = sa.select(
    sa.select(_a.seq).where(_a.id == sa.bindparam("id")).scalar_subquery(),
    sa.select(_a.hash).order_by(_a.seq.desc()).limit(1).scalar_subquery(),
    sa.select(sa.func.max(audit_checkpoints.c.seq)).scalar_subquery(),
)
"""Is this event id already in the chain, the head's hash, and the last checkpoint's seq: one statement
under the audit lock, so an append pays one round trip for what it must know before it inserts."""
INSERT_AUDIT_EVENT = sa.insert(audit_events).returning(_a.seq)


@cache
def upsert_candidate(dialect: str) -> sqlite.Insert | postgresql.Insert:
    """Park (or re-park) a claim check; a ref held by another tenant is left alone (rowcount 0)."""
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = insert(candidates).values(
        ref=sa.bindparam("ref"),
        tenant_id=sa.bindparam("tenant_id"),
        content=sa.bindparam("content"),
        created_at=sa.bindparam("created_at"),
        expires_at=sa.bindparam("expires_at"),
    )
    return stmt.on_conflict_do_update(
        index_elements=[_c.ref],
        set_={"content": stmt.excluded.content, "expires_at": stmt.excluded.expires_at},
        where=_c.tenant_id == stmt.excluded.tenant_id,
    )
