"""A memory record as a row and back, and the few reads of memory rows every part of the store shares.

Helpers run on a connection the caller holds, so a caller's read and its write share one transaction: plain
functions of a `Connection`, called directly inside `_query`/`_transact` bodies and through `run_sync` from
an `AsyncConnection`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from enum import Enum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, RowMapping

from memwarden.records import LIVE_STATUSES, MemoryRecord, sensitivity_rank
from memwarden.stores.sql import statements as Q
from memwarden.stores.sql_models import memories

_CHUNK = 500
"""Ids per IN (...) list: far below SQLite's and asyncpg's bound-parameter limits."""
_RECORD_FIELDS: tuple[str, ...] = tuple(MemoryRecord.model_fields)


def _touch_last_used(conn: Connection, tenant_id: str, ids: Sequence[str], at: datetime) -> None:
    """Record that these memories were just returned (recency ranking and retention use it); never an edit."""
    m = memories.c
    for chunk in _chunks(list(ids), _CHUNK):
        conn.execute(
            sa.update(memories)
            .where(m.tenant_id.concat("") == tenant_id, m.id.in_(chunk))  # by primary key: see _bound_filter_clause
            .values(last_used_at=at)
        )


def _select_memory(conn: Connection, tenant_id: str, memory_id: str) -> MemoryRecord | None:
    row = conn.execute(Q.MEMORY_BY_ID, {"tenant_id": tenant_id, "id": memory_id}).mappings().first()
    return _row_to_record(row) if row is not None else None


def _select_by_id_or_key(conn: Connection, tenant_id: str, memory_id: str, key: str | None) -> MemoryRecord | None:
    """The row with this id, else the one with this idempotency key: one statement for both lookups."""
    if key is None:
        rows = conn.execute(Q.MEMORY_BY_ID, {"tenant_id": tenant_id, "id": memory_id}).mappings().all()
    else:
        params = {"tenant_id": tenant_id, "id": memory_id, "key": key}
        rows = conn.execute(Q.MEMORY_BY_ID_OR_KEY, params).mappings().all()
    by_id = [r for r in rows if r["id"] == memory_id]
    chosen = by_id[0] if by_id else (rows[0] if rows else None)
    return _row_to_record(chosen) if chosen is not None else None


def _select_by_key(conn: Connection, tenant_id: str, key: str) -> MemoryRecord | None:
    m = memories.c
    row = conn.execute(sa.select(memories).where(m.tenant_id == tenant_id, m.idempotency_key == key)).mappings().first()
    return _row_to_record(row) if row is not None else None


def _column_value(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def _record_to_row(record: MemoryRecord) -> dict[str, Any]:
    row = {name: _column_value(value) for name, value in record.model_dump(mode="python").items()}
    row["sensitivity_rank"] = sensitivity_rank(record.sensitivity)
    row["live_slot"] = live_slot_key(record) if record.status in LIVE_STATUSES else None
    return row


def slot_key(scope: str, agent_id: str | None, store: str | None, slot: str) -> str:
    """The namespace-qualified slot a live value occupies (owner and tenant are columns of their own)."""
    return f"{scope}|{agent_id or ''}|{store or ''}|{slot}"


def live_slot_key(record: MemoryRecord) -> str | None:
    """`slot_key` of a record with a slot, None for slotless memories (they never conflict)."""
    if record.slot is None:
        return None
    return slot_key(record.scope.value, record.agent_id, record.store, record.slot)


def _row_to_record(row: RowMapping) -> MemoryRecord:
    return MemoryRecord.model_validate({name: row[name] for name in _RECORD_FIELDS})


def _records_by_ids(
    conn: Connection, stmt: sa.Select[Any], params: dict[str, Any], ids: Sequence[str]
) -> dict[str, MemoryRecord]:
    """Rows of `stmt` (which binds its ids as `ids`) for each distinct id, in chunks of `_CHUNK`, by id."""
    found: dict[str, MemoryRecord] = {}
    for chunk in _chunks(list(dict.fromkeys(ids)), _CHUNK):
        for row in conn.execute(stmt, {**params, "ids": chunk}).mappings():
            found[row["id"]] = _row_to_record(row)
    return found


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _utcnow() -> datetime:
    return datetime.now(UTC)
