"""The ReadFilter in SQL: what a principal may read becomes one WHERE clause, evaluated inside the query.

`read_filter_clause` mirrors `ReadFilter.admits` exactly. For the hot re-checks of index hits
(`eligible`, `eligible_meta`, `answer_search`) `by_ids_statement` binds the same clause once per filter
shape, with parameters in place of values, so the durable store (which never lags a tombstone) has the
last word on every hit before any content is loaded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from memwarden.records import MemoryRecord, MemoryType, ReadFilter, Status, sensitivity_rank
from memwarden.stores.audit import AuditEventIn
from memwarden.stores.sql import statements as Q
from memwarden.stores.sql.audit_log import AuditLog
from memwarden.stores.sql.cursors import _decode_memory_cursor, _encode_cursor, _iso
from memwarden.stores.sql.rows import _CHUNK, _chunks, _records_by_ids, _row_to_record, _touch_last_used
from memwarden.stores.sql_models import memories


@dataclass(frozen=True)
class EligibleMeta:
    """What ranking needs of an eligible memory (no content)."""

    status: Status
    created_at: datetime
    importance: float
    last_confirmed_at: datetime | None
    type: MemoryType = MemoryType.FACT
    source_system: str | None = None
    """The memory's system of record (source_ref.system), so Retrieve can tell which hits to revalidate."""
    source_key: str | None = None
    source_version: str | None = None
    version: int = 0
    """The row's version when ranked: a read-time check applies only if the row is still that version."""
    """source_ref.key and .version: enough to ask the source while the full row is still being read."""
    owner_id: str = ""
    session: str | None = None
    """provenance.session and .turn: the conversation context ranking uses (ids, never content)."""
    turn: str | None = None
    speaker: str | None = None
    """provenance.speaker, for ranking's "the query names who said it" (compared in the activity, never
    returned or recorded)."""


_M = memories.c
_META_COLUMNS = (
    _M.id,
    _M.status,
    _M.created_at,
    _M.importance,
    _M.last_confirmed_at,
    _M.type,
    _M.source_ref["system"].as_string().label("source_system"),
    _M.source_ref["key"].as_string().label("source_key"),
    _M.source_ref["version"].as_string().label("source_version"),
    _M.version,
    _M.owner_id,
    _M.provenance["session"].as_string().label("session"),
    _M.provenance["turn"].as_string().label("turn"),
    _M.provenance["speaker"].as_string().label("speaker"),
)
"""What `eligible_meta` reads: the id and `EligibleMeta`'s fields, never content."""
_STATUSES = {s.value: s for s in Status}
_TYPES = {t.value: t for t in MemoryType}
"""Stored values to their enums by dict lookup (cheaper than an Enum call per row and column)."""


class FilteredReads(AuditLog):
    """Reads of memories through a `ReadFilter`: the re-check of index hits, the search's answer, listings."""

    async def eligible(self, read_filter: ReadFilter, ids: Sequence[str], now: datetime) -> list[MemoryRecord]:
        """The subset of `ids` this filter admits *now*, in the order of `ids`.

        The durable store never lags a tombstone, so index hits are re-checked here before any
        content is loaded.
        """
        if not ids or not read_filter.clauses:
            return []
        return await self._query(lambda conn: _eligible_records(conn, read_filter, ids, now))

    async def answer_search(
        self,
        read_filter: ReadFilter,
        ids: Sequence[str],
        now: datetime,
        audit: Callable[[list[MemoryRecord]], AuditEventIn],
        *,
        drop_candidate: str | None = None,
        settings_owner: str | None = None,
        served: Callable[[list[MemoryRecord]], Sequence[str]] | None = None,
    ) -> list[MemoryRecord] | None:
        """`eligible`, its read event and the query's claim check dropped, in one write transaction.

        Why one: settings, load, audit and drop are each a transaction on their own, and every answer
        needs all four. Together, the content is read, the event naming exactly what was read is
        chained and the parked query dropped at once, so an answer never exists without its audit row
        (if the append fails, nothing is returned) and the audit never lists what was not read.
        `audit` builds the event from the records found (ids only, never content).

        `served`: the ids this answer hands out, from the records found; their `last_used_at` is set to
        `now` in the same transaction, so a use is recorded exactly when its read is audited.

        `settings_owner`: the person served; when they have switched memory off, nothing is read
        or audited and None is returned (the query is still dropped). Checked here, in the same
        transaction as the read, a switch-off that committed before it is always honoured.
        """

        def answer(conn: Connection) -> list[MemoryRecord] | None:
            if settings_owner is not None:
                params = {"tenant_id": read_filter.tenant_id, "owner_id": settings_owner}
                enabled = conn.scalar(Q.MEMORY_ENABLED, params)
                if enabled is not None and not enabled:
                    if drop_candidate is not None:
                        conn.execute(Q.DELETE_CANDIDATE, {"ref": drop_candidate})
                    return None
            records = _eligible_records(conn, read_filter, ids, now)
            self._append_audit(conn, audit(records))
            if served is not None:
                _touch_last_used(conn, read_filter.tenant_id, served(records), now)
            if drop_candidate is not None:
                conn.execute(Q.DELETE_CANDIDATE, {"ref": drop_candidate})
            return records

        return await self._transact(answer)

    async def eligible_meta(
        self, read_filter: ReadFilter, ids: Sequence[str], now: datetime
    ) -> dict[str, EligibleMeta]:
        """`eligible`, for ranking: the same re-check, returning only what ranking needs, never content.

        Retrieve re-checks up to a hundred index candidates per query; loading their content (and
        building full records) would cost time and bring memory text into the search path for nothing.
        """
        if not ids or not read_filter.clauses:
            return {}
        stmt, params = by_ids_statement("meta", _META_COLUMNS, read_filter, now)

        def read(conn: Connection) -> dict[str, EligibleMeta]:
            found: dict[str, EligibleMeta] = {}
            for chunk in _chunks(list(dict.fromkeys(ids)), _CHUNK):
                rows = conn.execute(stmt, {**params, "ids": chunk})
                # Unpacked by position, in `_META_COLUMNS`' order: a named lookup on each of a dozen
                # columns of every candidate row is a visible share of the search's critical path.
                for (
                    memory_id,
                    status,
                    created_at,
                    importance,
                    last_confirmed_at,
                    memory_type,
                    source_system,
                    source_key,
                    source_version,
                    version,
                    owner_id,
                    session,
                    turn,
                    speaker,
                ) in rows:
                    found[memory_id] = EligibleMeta(
                        status=_STATUSES[status],
                        created_at=created_at,
                        importance=importance,
                        last_confirmed_at=last_confirmed_at,
                        type=_TYPES[memory_type],
                        source_system=source_system,
                        source_key=source_key,
                        source_version=source_version,
                        version=version,
                        owner_id=owner_id,
                        session=session,
                        turn=turn,
                        speaker=speaker,
                    )
            return found

        return await self._query(read, single_statement=True)

    async def list_memories(
        self, read_filter: ReadFilter, *, limit: int, cursor: str | None, now: datetime | None = None
    ) -> tuple[list[MemoryRecord], str | None]:
        """Newest first, keyset-paginated; the cursor is opaque and `ValueError("cursor")` when bad.

        Statuses come from `read_filter.statuses`; past-expiry rows are left out only when `now`
        is given (a person's own listing may want to show what has lapsed).
        """
        if limit < 1:
            raise ValueError("limit")
        after = _decode_memory_cursor(cursor) if cursor is not None else None
        if not read_filter.clauses:
            return [], None
        m = memories.c
        where, params = read_filter_clause(read_filter, now=now)
        stmt = sa.select(memories).where(where)
        if after is not None:
            created_at, memory_id = after
            stmt = stmt.where(sa.or_(m.created_at < created_at, sa.and_(m.created_at == created_at, m.id < memory_id)))
        stmt = stmt.order_by(m.created_at.desc(), m.id.desc()).limit(limit + 1)
        async with self._read() as conn:
            rows = (await conn.execute(stmt, params)).mappings().all()
        page = [_row_to_record(row) for row in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            next_cursor = _encode_cursor({"c": _iso(page[-1].created_at), "i": page[-1].id})
        return page, next_cursor


def read_filter_clause(
    read_filter: ReadFilter, *, now: datetime | None = None
) -> tuple[ColumnElement[bool], dict[str, Any]]:
    """The WHERE clause for what `read_filter` admits and the parameters to execute it with; mirrors
    `ReadFilter.admits` exactly.

    tenant AND (any namespace clause) AND status AND sensitivity AND types AND (when `now` is
    given) not expired. No clauses admit nothing. The same clause `by_ids_statement` binds.
    """
    if not read_filter.clauses:
        return sa.false(), {}
    clause = _bound_filter_clause(_filter_shape(read_filter), by_ids=False, with_now=now is not None)
    return clause, _filter_params(read_filter, now)


_FilterShape = tuple[tuple[tuple[str, bool, bool, bool], ...], bool]
_BY_IDS: dict[tuple[str, _FilterShape], sa.Select[Any]] = {}
"""`by_ids_statement`'s statements, built once per filter shape with bound parameters: building the
clause anew for every query cost more than the read itself on Retrieve's hot path."""


def _filter_shape(read_filter: ReadFilter) -> _FilterShape:
    """What decides the statement's text: each clause's scope and which of its lists it has, and types."""
    clauses = tuple(
        (c.scope.value, c.owner_ids is not None, c.agent_id is not None, c.stores is not None)
        for c in read_filter.clauses
    )
    return clauses, read_filter.types is not None


def _bound_filter_clause(shape: _FilterShape, *, by_ids: bool, with_now: bool) -> ColumnElement[bool]:
    """What a read filter of this shape admits, with parameters in place of values (see `_filter_params`).

    `by_ids`: the statement also lists the ids (`id IN (...)`), so the primary key is the way in. The
    tenant test is then written as `tenant_id || '' = ?` (same truth, no index can serve it), because
    SQLite's planner, without statistics, otherwise walks a whole tenant through a tenant-led index, a
    cost that grows with the tenant instead of with the ids asked for.
    """
    m = memories.c
    namespaces: list[ColumnElement[bool]] = []
    for i, (scope, owners, agent, stores) in enumerate(shape[0]):
        parts: list[ColumnElement[bool]] = [m.scope == scope]
        if owners:
            parts.append(m.owner_id.in_(sa.bindparam(f"owners_{i}", expanding=True)))
        if agent:
            parts.append(m.agent_id == sa.bindparam(f"agent_{i}"))
        if stores:
            parts.append(m.store.in_(sa.bindparam(f"stores_{i}", expanding=True)))
        namespaces.append(sa.and_(*parts))
    conditions: list[ColumnElement[bool]] = [
        (m.tenant_id.concat("") if by_ids else m.tenant_id) == sa.bindparam("tenant_id"),
        sa.or_(*namespaces),
        m.status.in_(sa.bindparam("statuses", expanding=True)),
        m.sensitivity_rank <= sa.bindparam("max_rank"),
    ]
    if shape[1]:
        conditions.append(m.type.in_(sa.bindparam("types", expanding=True)))
    if with_now:
        conditions.append(sa.or_(m.expires_at.is_(None), m.expires_at > sa.bindparam("now", type_=m.expires_at.type)))
    return sa.and_(*conditions)


def _filter_params(read_filter: ReadFilter, now: datetime | None) -> dict[str, Any]:
    params: dict[str, Any] = {
        "tenant_id": read_filter.tenant_id,
        "statuses": [s.value for s in read_filter.statuses],
        "max_rank": sensitivity_rank(read_filter.max_sensitivity),
    }
    if now is not None:
        params["now"] = now
    for i, c in enumerate(read_filter.clauses):
        if c.owner_ids is not None:
            params[f"owners_{i}"] = list(c.owner_ids)
        if c.agent_id is not None:
            params[f"agent_{i}"] = c.agent_id
        if c.stores is not None:
            params[f"stores_{i}"] = list(c.stores)
    if read_filter.types is not None:
        params["types"] = [t.value for t in read_filter.types]
    return params


def by_ids_statement(
    kind: str, columns: Sequence[Any], read_filter: ReadFilter, now: datetime
) -> tuple[sa.Select[Any], dict[str, Any]]:
    """`SELECT columns WHERE <what read_filter admits at now> AND id IN :ids` (by primary key) and its
    parameters (bind `ids` per chunk); `kind` names the column set, so each set is built once per shape.
    A filter with no clauses admits nothing: callers return before asking."""
    if not read_filter.clauses:
        raise ValueError("a read filter without clauses admits nothing")
    key = (kind, _filter_shape(read_filter))
    stmt = _BY_IDS.get(key)
    if stmt is None:
        where = _bound_filter_clause(key[1], by_ids=True, with_now=True)
        stmt = sa.select(*columns).where(where, memories.c.id.in_(sa.bindparam("ids", expanding=True)))
        _BY_IDS[key] = stmt
    return stmt, _filter_params(read_filter, now)


def _eligible_records(
    conn: Connection, read_filter: ReadFilter, ids: Sequence[str], now: datetime
) -> list[MemoryRecord]:
    """`SqlStore.eligible` inside a transaction the caller holds (none without ids or clauses)."""
    if not ids or not read_filter.clauses:
        return []
    stmt, params = by_ids_statement("records", (memories,), read_filter, now)
    found = _records_by_ids(conn, stmt, params, ids)
    return [found[i] for i in dict.fromkeys(ids) if i in found]
