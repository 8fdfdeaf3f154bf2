"""Replicas: copies of committed memories in other SQL databases (read/regional replicas, exports).

Each replica is a SQL URL holding one table, `replica_memories`, created on open (it is a copy
target, not a schema the service migrates). Two rules make a replica safe to forget from:
- copies are idempotent upserts by memory id, so a retried activity writes the same row;
- a forgotten memory leaves a *tombstone row* in the replica (no content), and a copy never
  overwrites a tombstone: a lagging copy activity cannot bring deleted content back. Tombstones are
  written even for ids the replica never received, for the same reason.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from memwarden.records import FORGOTTEN_STATUSES, MemoryRecord, Status
from memwarden.stores.sql_models import UTCDateTime

replica_metadata = sa.MetaData()

replica_memories = sa.Table(
    "replica_memories",
    replica_metadata,
    sa.Column("id", sa.String(), primary_key=True),
    sa.Column("tenant_id", sa.String(), nullable=False),
    sa.Column("owner_id", sa.String(), nullable=True),
    sa.Column("scope", sa.String(16), nullable=True),
    sa.Column("agent_id", sa.String(), nullable=True),
    sa.Column("store", sa.String(), nullable=True),
    sa.Column("type", sa.String(32), nullable=True),
    sa.Column("slot", sa.String(), nullable=True),
    sa.Column("content", sa.Text(), nullable=True),
    sa.Column("content_hash", sa.String(64), nullable=True),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=True),
    sa.Column("copied_at", UTCDateTime(), nullable=False),
    sa.Column("purged_at", UTCDateTime(), nullable=True),
    sa.Index("ix_replica_memories_tenant_id", "tenant_id"),
)

_TOMBSTONES = tuple(sorted(s.value for s in FORGOTTEN_STATUSES))
_described = sa.or_(replica_memories.c.owner_id.is_not(None), replica_memories.c.slot.is_not(None))
"""A copy that still says whose it was or what slot it filled: a tombstone keeps neither."""
_CHUNK = 500


def replica_name(url: str) -> str:
    """A stable, secret-free sink name for a replica URL: `replica:<8 hex of the URL without password>`."""
    safe = make_url(url).render_as_string(hide_password=True)
    return f"replica:{hashlib.sha256(safe.encode()).hexdigest()[:8]}"


class ReplicaStore:
    """One replica database; `open(url)` creates its table if absent."""

    def __init__(self, engine: AsyncEngine, name: str) -> None:
        self._engine = engine
        self.name = name

    @classmethod
    async def open(cls, url: str) -> ReplicaStore:
        sa_url = make_url(url)
        if sa_url.get_backend_name() == "sqlite" and sa_url.drivername == "sqlite":
            sa_url = sa_url.set(drivername="sqlite+aiosqlite")
        if sa_url.get_backend_name() == "postgresql" and sa_url.drivername == "postgresql":
            sa_url = sa_url.set(drivername="postgresql+asyncpg")
        engine = create_async_engine(sa_url, hide_parameters=True)  # a replica's errors would carry content
        if engine.dialect.name == "sqlite":
            sa.event.listen(engine.sync_engine, "connect", _sqlite_secure)
        async with engine.begin() as conn:
            await conn.run_sync(replica_metadata.create_all)
        return cls(engine, replica_name(url))

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    def _insert(self) -> sqlite.Insert | postgresql.Insert:
        return (postgresql.insert if self.dialect == "postgresql" else sqlite.insert)(replica_memories)

    async def copy(self, record: MemoryRecord, now: datetime | None = None) -> bool:
        """Upsert a committed memory; False (and nothing written) when the replica holds its tombstone."""
        r = replica_memories.c
        values = {
            "id": record.id,
            "tenant_id": record.tenant_id,
            "owner_id": record.owner_id,
            "scope": record.scope.value,
            "agent_id": record.agent_id,
            "store": record.store,
            "type": record.type.value,
            "slot": record.slot,
            "content": record.content,
            "content_hash": record.content_hash,
            "status": record.status.value,
            "created_at": record.created_at,
            "copied_at": now or datetime.now(UTC),
        }
        stmt = self._insert().values(**values)
        stmt = stmt.on_conflict_do_update(
            index_elements=[r.id],
            set_={k: stmt.excluded[k] for k in values if k != "id"},
            where=r.status.not_in(_TOMBSTONES),
        )
        async with self._engine.begin() as conn:
            result = await conn.execute(stmt)
        return result.rowcount == 1

    async def tombstone(self, tenant_id: str, ids: Sequence[str], now: datetime) -> int:
        """Replace these memories' copies with tombstones (content gone); returns rows that held content."""
        r = replica_memories.c
        changed = 0
        for start in range(0, len(ids), _CHUNK):
            chunk = list(ids[start : start + _CHUNK])
            async with self._engine.begin() as conn:
                result = await conn.execute(
                    sa.update(replica_memories)
                    .where(r.tenant_id == tenant_id, r.id.in_(chunk), r.content.is_not(None))
                    .values(content=None, content_hash=None, status=Status.PURGED.value, purged_at=now)
                )
                changed += result.rowcount
                await conn.execute(
                    sa.update(replica_memories)
                    .where(r.tenant_id == tenant_id, r.id.in_(chunk), r.status.not_in(_TOMBSTONES))
                    .values(status=Status.PURGED.value, purged_at=now)
                )
                # A tombstone says neither what it was nor whose (memwarden.stores.tombstones).
                await conn.execute(
                    sa.update(replica_memories)
                    .where(r.tenant_id == tenant_id, r.id.in_(chunk), _described)
                    .values(owner_id=None, slot=None)
                )
                stmt = self._insert().values(
                    [
                        {
                            "id": mid,
                            "tenant_id": tenant_id,
                            "status": Status.PURGED.value,
                            "copied_at": now,
                            "purged_at": now,
                        }
                        for mid in chunk
                    ]
                )
                await conn.execute(stmt.on_conflict_do_nothing(index_elements=[r.id]))
        await self.compact()
        return changed

    async def compact(self) -> dict[str, object]:
        """Make the removed bytes unrecoverable, as the primary's store sink does for its own database.

        SQLite (secure_delete on): a TRUNCATE checkpoint empties the WAL that held the old pages.
        PostgreSQL: `VACUUM replica_memories` marks the dead row versions (the old content, owner and
        slot) reusable, the primary's guarantee (docs/decisions/postgres-vacuum-guarantee.md).
        """
        async with self._engine.connect() as conn:
            if self.dialect == "sqlite":
                await conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
                return {"engine": "sqlite", "checkpoint": "truncate"}
            auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
            await auto.exec_driver_sql("VACUUM replica_memories")
        return {"engine": "postgresql", "vacuum": ["replica_memories"]}

    async def content_remaining(self, tenant_id: str, ids: Sequence[str]) -> tuple[int, int]:
        """(copies still holding content, ids without a tombstone): both must be 0 once forgotten."""
        r = replica_memories.c
        holding = missing = 0
        async with self._engine.connect() as conn:
            for start in range(0, len(ids), _CHUNK):
                chunk = list(ids[start : start + _CHUNK])
                holding += int(
                    await conn.scalar(
                        sa.select(sa.func.count()).where(
                            r.tenant_id == tenant_id,
                            r.id.in_(chunk),
                            sa.or_(r.content.is_not(None), sa.and_(r.status.in_(_TOMBSTONES), _described)),
                        )
                    )
                    or 0
                )
                tombs = int(
                    await conn.scalar(
                        sa.select(sa.func.count()).where(
                            r.tenant_id == tenant_id, r.id.in_(chunk), r.status.in_(_TOMBSTONES)
                        )
                    )
                    or 0
                )
                missing += len(chunk) - tombs
        return holding, missing

    async def get(self, memory_id: str) -> dict[str, object] | None:
        async with self._engine.connect() as conn:
            row = (await conn.execute(sa.select(replica_memories).where(replica_memories.c.id == memory_id))).mappings()
            first = row.first()
        return dict(first) if first is not None else None

    async def health(self) -> bool:
        try:
            async with self._engine.connect() as conn:
                await conn.execute(sa.text("SELECT 1"))
        except Exception:
            return False
        return True

    async def close(self) -> None:
        await self._engine.dispose()


def _sqlite_secure(dbapi_connection: object, _record: object) -> None:
    cursor = dbapi_connection.cursor()  # type: ignore[attr-defined]
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA secure_delete=ON")
        cursor.execute("PRAGMA busy_timeout=5000")
    finally:
        cursor.close()
