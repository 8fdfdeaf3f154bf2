"""One contract for the durable store: SQLite always, PostgreSQL when MEMWARDEN_TEST_POSTGRES_URL is set.

Each backend gets a fresh database for the module (a new SQLite file; a new PostgreSQL schema,
dropped afterwards), and tests that must see a whole table (the audit chain, migrations) get one
of their own. Tests within a module isolate themselves by tenant id.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from pydantic import ValidationError
from sqlalchemy.engine import Connection
from sqlalchemy.exc import StatementError
from sqlalchemy.ext.asyncio import create_async_engine

from memwarden.records import (
    InvalidTransition,
    MemoryRecord,
    MemoryType,
    NamespaceClause,
    Provenance,
    ReadFilter,
    Scope,
    Sensitivity,
    SourceKind,
    SourceRef,
    Status,
    content_hash,
)
from memwarden.stores.audit import GENESIS_HASH, AuditEventIn, chain_hash
from memwarden.stores.sql import ConcurrencyConflict, SqlStore
from memwarden.stores.sql_models import metadata
from tests.conftest import service_url

HEAD_REVISION = "0009_imports"
REPO_ROOT = Path(__file__).resolve().parents[2]
BASE = datetime(2026, 11, 30, 12, 0, 0, 123456, tzinfo=UTC)
IST = timezone(timedelta(hours=5, minutes=30))
DATETIME_FIELDS = [name for name, f in MemoryRecord.model_fields.items() if "datetime" in str(f.annotation)]


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "postgresql":
        service_url("MEMWARDEN_TEST_POSTGRES_URL")  # skips (fails in CI) when not configured
    return request.param


@asynccontextmanager
async def database(backend: str, tmp_dir: Path) -> AsyncIterator[tuple[str, str | None]]:
    """A fresh, empty database: (url, schema). SQLite: a new file; PostgreSQL: a new schema."""
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_dir / uuid.uuid4().hex / 'memwarden.db'}", None
        return
    url = service_url("MEMWARDEN_TEST_POSTGRES_URL")
    schema = f"mw_{uuid.uuid4().hex[:16]}"
    admin = create_async_engine(url)
    try:
        async with admin.begin() as conn:
            await conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        yield url, schema
    finally:
        async with admin.begin() as conn:
            await conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        await admin.dispose()


@asynccontextmanager
async def fresh_store(backend: str, tmp_dir: Path) -> AsyncIterator[SqlStore]:
    async with database(backend, tmp_dir) as (url, schema):
        store = await SqlStore.open(url, schema=schema)
        try:
            await store.migrate()
            yield store
        finally:
            await store.close()


@pytest.fixture(scope="module")
async def store(backend: str, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[SqlStore]:
    async with fresh_store(backend, tmp_path_factory.mktemp("sql")) as s:
        yield s


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def make_record(tenant_id: str, **overrides: Any) -> MemoryRecord:
    content = overrides.pop("content", "likes green tea")
    fields: dict[str, Any] = {
        "id": str(uuid.uuid4()),
        "tenant_id": tenant_id,
        "owner_id": "u1",
        "type": MemoryType.PREFERENCE,
        "content": content,
        "content_hash": content_hash(content if content is not None else "purged"),
        "source_kind": SourceKind.USER,
        "reason": "user_explicit_preference",
        "created_at": BASE,
        "updated_at": BASE,
    }
    fields.update(overrides)
    return MemoryRecord(**fields)


async def scalar(store: SqlStore, sql: str, **params: Any) -> Any:
    async with store.engine.connect() as conn:
        return await conn.scalar(sa.text(sql), params)


# -- lifecycle and schema --------------------------------------------------------------------


async def test_open_ping_and_dialect(store: SqlStore, backend: str) -> None:
    assert store.dialect == backend
    assert await store.ping() is True


async def test_migrate_twice_is_a_noop(store: SqlStore) -> None:
    t = tenant()
    rec = await store.insert_memory(make_record(t))
    assert await scalar(store, "SELECT version_num FROM alembic_version") == HEAD_REVISION
    await store.migrate()
    await store.migrate()
    assert await scalar(store, "SELECT count(*) FROM alembic_version") == 1
    assert await scalar(store, "SELECT version_num FROM alembic_version") == HEAD_REVISION
    assert await store.get_memory(t, rec.id) == rec


async def test_migrations_create_exactly_the_models(store: SqlStore) -> None:
    def diff(conn: Connection) -> list[Any]:
        return compare_metadata(MigrationContext.configure(conn, opts={"compare_type": True}), metadata)

    async with store.engine.connect() as conn:
        assert await conn.run_sync(diff) == []


MIGRATE_SCRIPT = """
import asyncio, sys
from memwarden.stores.sql import SqlStore

async def main() -> None:
    store = await SqlStore.open(sys.argv[1], schema=sys.argv[2] or None)
    try:
        await store.migrate()
    finally:
        await store.close()

asyncio.run(main())
"""


async def test_concurrent_migrations_from_several_processes(backend: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
    async with database(backend, tmp_path) as (url, schema):
        procs = [
            await asyncio.create_subprocess_exec(
                sys.executable, "-c", MIGRATE_SCRIPT, url, schema or "", env=env, stderr=asyncio.subprocess.PIPE
            )
            for _ in range(4)
        ]
        results = await asyncio.gather(*(p.communicate() for p in procs))
        for proc, (_, stderr) in zip(procs, results, strict=True):
            assert proc.returncode == 0, stderr.decode()[-2000:]
        store = await SqlStore.open(url, schema=schema)
        try:
            assert await scalar(store, "SELECT version_num FROM alembic_version") == HEAD_REVISION
            assert await scalar(store, "SELECT count(*) FROM alembic_version") == 1
            await store.migrate()
        finally:
            await store.close()


async def test_concurrent_migrations_in_one_process(backend: str, tmp_path: Path) -> None:
    """Alembic keeps its context in process globals; migrations on one loop must not interleave."""
    async with AsyncExitStack() as stack:
        stores: list[SqlStore] = []
        for _ in range(4):
            url, schema = await stack.enter_async_context(database(backend, tmp_path))
            for _ in range(2):  # two stores per database, as an API and a worker sharing a process would
                store = await SqlStore.open(url, schema=schema)
                stack.push_async_callback(store.close)
                stores.append(store)
        await asyncio.gather(*(s.migrate() for s in stores))
        for s in stores:
            assert await scalar(s, "SELECT version_num FROM alembic_version") == HEAD_REVISION
            assert await scalar(s, "SELECT count(*) FROM memories") == 0


async def test_sqlite_connection_settings(store: SqlStore, backend: str) -> None:
    if backend != "sqlite":
        pytest.skip("SQLite pragmas")
    assert await scalar(store, "PRAGMA secure_delete") == 1
    assert await scalar(store, "PRAGMA journal_mode") == "wal"
    assert await scalar(store, "PRAGMA foreign_keys") == 1
    assert await scalar(store, "PRAGMA busy_timeout") == 5000
    assert await scalar(store, "PRAGMA synchronous") == 2  # FULL: every commit waits for the disk


async def test_a_claim_check_is_visible_at_once_belongs_to_its_tenant_and_commits_full(
    store: SqlStore, backend: str
) -> None:
    """A parked query is committed like every other write (the workflow starts only after it landed)."""
    t = tenant()
    ref = f"query-{uuid.uuid4()}"
    await store.put_candidate(ref, t, "what tea", datetime.now(UTC) + timedelta(minutes=5))
    assert await store.get_candidate(ref) == "what tea"  # another connection sees it at once
    with pytest.raises(ValueError):
        await store.put_candidate(ref, tenant(), "hijack", datetime.now(UTC) + timedelta(minutes=5))
    async with store._write() as conn:
        if backend == "sqlite":
            assert await conn.scalar(sa.text("PRAGMA synchronous")) == 2
        else:
            assert await conn.scalar(sa.text("SHOW synchronous_commit")) == "on"
    await store.delete_candidate(ref)
    assert await store.get_candidate(ref) is None


# -- memories --------------------------------------------------------------------------------


async def test_round_trip_preserves_every_field(store: SqlStore) -> None:
    t = tenant()
    at = datetime(2026, 5, 1, 9, 30, 15, 654321, tzinfo=IST)
    content = 'prefers "aisle" seats, café ☕, 100% sure\nsecond line'
    rec = make_record(
        t,
        owner_id="owner-7",
        scope=Scope.SHARED,
        agent_id="agent-3",
        store="travel",
        type=MemoryType.FACT,
        slot="user.seat",
        content=content,
        source_kind=SourceKind.SYSTEM,
        source_ref=SourceRef(system="crm", key="cust/42", version='W/"7"'),
        provenance=Provenance(session="s1", turn="t9", span="sp", writer="agent:agent-3", speaker="Joanna"),
        reason="user_stated_fact",
        importance=0.8125,
        confidence=0.3333333333333333,
        sensitivity=Sensitivity.CONFIDENTIAL,
        valid_from=at,
        valid_to=at + timedelta(days=30),
        expires_at=at + timedelta(days=60),
        last_confirmed_at=at + timedelta(seconds=1),
        last_used_at=at + timedelta(seconds=2),
        supersedes=str(uuid.uuid4()),
        superseded_by=str(uuid.uuid4()),
        status=Status.STALE,
        retention_class="long",
        policy_version="test-policy",
        version=4,
        created_at=at,
        updated_at=at + timedelta(microseconds=1),
        tombstoned_at=at + timedelta(hours=1),
        purged_at=at + timedelta(hours=2),
    )
    assert all(getattr(rec, f) is not None for f in MemoryRecord.model_fields if f != "content")
    stored = await store.insert_memory(rec, idempotency_key="k-rt", derived_from=["a", "b"])
    got = await store.get_memory(t, rec.id)
    assert got is not None
    for loaded in (stored, got):
        assert loaded.model_dump() == rec.model_dump()
        for name in DATETIME_FIELDS:
            value = getattr(loaded, name)
            assert value.tzinfo is not None and value.utcoffset() == timedelta(0), name
            assert value == getattr(rec, name), name
        assert isinstance(loaded.status, Status) and loaded.status is Status.STALE
        assert loaded.scope is Scope.SHARED and loaded.type is MemoryType.FACT
        assert loaded.sensitivity is Sensitivity.CONFIDENTIAL and loaded.source_kind is SourceKind.SYSTEM
        assert loaded.source_ref == rec.source_ref and loaded.provenance == rec.provenance
    assert await store.get_memory(tenant(), rec.id) is None  # another tenant never sees it
    many = await store.get_many(t, [rec.id, "missing", rec.id])
    assert list(many) == [rec.id] and many[rec.id] == got
    async with store.engine.connect() as conn:
        row = (await conn.execute(sa.text("SELECT sensitivity_rank FROM memories WHERE id = :i"), {"i": rec.id})).one()
    assert row.sensitivity_rank == 3


async def test_nullable_fields_round_trip_as_null(store: SqlStore) -> None:
    t = tenant()
    rec = make_record(t, content=None)
    await store.insert_memory(rec)
    assert await store.get_memory(t, rec.id) == rec
    assert await scalar(store, "SELECT count(*) FROM memories WHERE id = :i AND source_ref IS NULL", i=rec.id) == 1


async def test_naive_datetimes_are_refused(store: SqlStore) -> None:
    rec = make_record(tenant(), created_at=datetime(2026, 1, 1))
    with pytest.raises((ValueError, StatementError), match="naive datetime"):
        await store.insert_memory(rec)


async def test_insert_is_idempotent(store: SqlStore) -> None:
    t = tenant()
    rec = make_record(t)
    first = await store.insert_memory(rec)
    retry = rec.model_copy(update={"content": "something else", "version": 9})
    again = await store.insert_memory(retry)
    assert again == first
    assert await store.get_memory(t, rec.id) == first
    assert await scalar(store, "SELECT count(*) FROM memories WHERE id = :i", i=rec.id) == 1


async def test_idempotency_key_lookup(store: SqlStore) -> None:
    t = tenant()
    rec = make_record(t)
    await store.insert_memory(rec, idempotency_key="req-1")
    found = await store.find_by_idempotency_key(t, "req-1")
    assert found is not None and found.id == rec.id
    assert await store.find_by_idempotency_key(t, "req-2") is None
    assert await store.find_by_idempotency_key(tenant(), "req-1") is None
    # a retried request with a fresh id but the same key answers with the original memory
    dup = make_record(t)
    assert (await store.insert_memory(dup, idempotency_key="req-1")).id == rec.id
    assert await store.get_memory(t, dup.id) is None
    # keys are per tenant, and any number of memories may have no key
    other_tenant = make_record(tenant())
    assert (await store.insert_memory(other_tenant, idempotency_key="req-1")).id == other_tenant.id
    a, b = make_record(t), make_record(t)
    await store.insert_memory(a)
    await store.insert_memory(b)
    assert set(await store.get_many(t, [a.id, b.id])) == {a.id, b.id}


# -- the read filter in SQL ------------------------------------------------------------------


def agent_filter(t: str) -> ReadFilter:
    return ReadFilter(
        tenant_id=t,
        clauses=(
            NamespaceClause(scope=Scope.USER, owner_ids=("u1",)),
            NamespaceClause(scope=Scope.AGENT, owner_ids=("u1", "agent:a1"), agent_id="a1"),
            NamespaceClause(scope=Scope.SHARED, stores=("s1",)),
        ),
        types=(MemoryType.PREFERENCE, MemoryType.FACT),
        max_sensitivity=Sensitivity.CONFIDENTIAL,
    )


async def test_eligible_applies_every_part_of_the_filter_in_order(store: SqlStore) -> None:
    t = tenant()
    now = BASE + timedelta(days=1)
    keep = {
        "user": make_record(t, provenance=Provenance(session="s1", turn="D1:3", speaker="Nate")),
        "agent_own": make_record(t, scope=Scope.AGENT, agent_id="a1"),
        "agent_self": make_record(t, scope=Scope.AGENT, agent_id="a1", owner_id="agent:a1"),
        "shared_member": make_record(t, scope=Scope.SHARED, store="s1", owner_id="someone"),
        "stale": make_record(t, status=Status.STALE, type=MemoryType.FACT),
        "sourced": make_record(
            t, type=MemoryType.PREFERENCE, source_ref=SourceRef(system="hr", key="emp-7/city", version="v3")
        ),
        "not_yet_expired": make_record(t, expires_at=now + timedelta(seconds=1)),
        "max_sensitive": make_record(t, sensitivity=Sensitivity.CONFIDENTIAL),
    }
    drop = {
        "other_tenant": make_record(tenant()),
        "other_owner": make_record(t, owner_id="u2"),
        "other_agent": make_record(t, scope=Scope.AGENT, agent_id="a2"),
        "agent_about_other_user": make_record(t, scope=Scope.AGENT, agent_id="a1", owner_id="u2"),
        "non_member_store": make_record(t, scope=Scope.SHARED, store="s2"),
        "shared_without_store": make_record(t, scope=Scope.SHARED),
        "wrong_type": make_record(t, type=MemoryType.EPISODIC),
        "too_sensitive": make_record(t, sensitivity=Sensitivity.RESTRICTED),
        "superseded": make_record(t, status=Status.SUPERSEDED),
        "pending": make_record(t, status=Status.PENDING),
        "tombstoned": make_record(t, status=Status.TOMBSTONED),
        "expired": make_record(t, expires_at=now - timedelta(seconds=1)),
        "expires_exactly_now": make_record(t, expires_at=now),
    }
    for rec in [*keep.values(), *drop.values()]:
        await store.insert_memory(rec)
    rf = agent_filter(t)
    order = [
        drop["other_tenant"].id,
        keep["shared_member"].id,
        drop["expired"].id,
        keep["max_sensitive"].id,
        keep["user"].id,
        "no-such-id",
        keep["stale"].id,
        keep["sourced"].id,
        drop["other_agent"].id,
        keep["agent_self"].id,
        keep["user"].id,
        keep["not_yet_expired"].id,
        keep["agent_own"].id,
        *[r.id for r in drop.values()],
    ]
    got = await store.eligible(rf, order, now)
    expected = list(dict.fromkeys(i for i in order if i in {r.id for r in keep.values()}))
    assert [r.id for r in got] == expected
    # the ranking variant re-checks with the same clause and returns metadata only
    meta = await store.eligible_meta(rf, order, now)
    assert set(meta) == set(expected)
    for rec in got:
        m = meta[rec.id]
        src = rec.source_ref
        assert (
            m.status,
            m.created_at,
            m.importance,
            m.last_confirmed_at,
            m.type,
            m.version,
            m.owner_id,
            (m.source_system, m.source_key, m.source_version),
        ) == (
            rec.status,
            rec.created_at,
            rec.importance,
            rec.last_confirmed_at,
            rec.type,
            rec.version,
            rec.owner_id,
            (src.system, src.key, src.version) if src is not None else (None, None, None),
        )
    assert (meta[keep["sourced"].id].source_system, meta[keep["sourced"].id].source_version) == ("hr", "v3")
    assert meta[keep["sourced"].id].type is MemoryType.PREFERENCE and meta[keep["stale"].id].type is MemoryType.FACT
    # the conversation context ranking uses: owner, provenance session, turn and speaker (no content)
    user = meta[keep["user"].id]
    assert (user.owner_id, user.session, user.turn, user.speaker) == ("u1", "s1", "D1:3", "Nate")
    assert (meta[keep["stale"].id].session, meta[keep["stale"].id].turn, meta[keep["stale"].id].speaker) == (
        None,
        None,
        None,
    )
    assert meta[keep["shared_member"].id].owner_id == "someone"
    assert await store.eligible_meta(rf, [], now) == {}
    # the SQL translation and ReadFilter.admits agree on every record
    for name, rec in [*keep.items(), *drop.items()]:
        assert rf.admits(rec, now) is (name in keep), name
    assert await store.eligible(rf, [], now) == []
    # listing uses the same translation
    listed, _ = await store.list_memories(rf, limit=50, cursor=None, now=now)
    assert {r.id for r in listed} == {r.id for r in keep.values()}


async def test_answer_search_reads_audits_and_drops_the_query_in_one_transaction(store: SqlStore) -> None:
    t = tenant()
    now = BASE + timedelta(days=1)
    ok, gone = make_record(t), make_record(t, status=Status.TOMBSTONED)
    other = make_record(tenant())
    for rec in (ok, gone, other):
        await store.insert_memory(rec)
    ref = f"query-{uuid.uuid4()}"
    await store.put_candidate(ref, t, "what tea do I like", datetime.now(UTC) + timedelta(minutes=5))
    seen: list[list[str]] = []

    def event(found: list[MemoryRecord]) -> AuditEventIn:
        seen.append([r.id for r in found])
        return AuditEventIn(
            id=f"read:{ref}", tenant_id=t, actor="agent:a1", operation="read", details={"n": len(found)}
        )

    got = await store.answer_search(agent_filter(t), [gone.id, ok.id, other.id, ok.id], now, event, drop_candidate=ref)
    assert [r.id for r in got] == [ok.id] and got[0].content == ok.content
    assert seen == [[ok.id]]  # the event is built from exactly what was read
    assert await store.get_candidate(ref) is None
    events, _ = await store.list_audit(t, limit=10, cursor=None)
    assert [(e.id, e.details) for e in events] == [(f"read:{ref}", {"n": 1})]
    assert await store.verify_audit() == (True, None)

    # The event cannot be built (or appended): nothing is returned and the query stays parked.
    ref2 = f"query-{uuid.uuid4()}"
    await store.put_candidate(ref2, t, "again", datetime.now(UTC) + timedelta(minutes=5))

    def broken(found: list[MemoryRecord]) -> AuditEventIn:
        raise RuntimeError("audit refused")

    with pytest.raises(RuntimeError):
        await store.answer_search(agent_filter(t), [ok.id], now, broken, drop_candidate=ref2)
    assert await store.get_candidate(ref2) == "again"
    # The person served switched memory off: nothing read, nothing audited, the query dropped.
    ref3 = f"query-{uuid.uuid4()}"
    await store.put_candidate(ref3, t, "off", datetime.now(UTC) + timedelta(minutes=5))
    assert await store.answer_search(
        agent_filter(t), [ok.id], now, event, drop_candidate=ref3, settings_owner="u2"
    ) == [r for r in got]  # someone else's switch changes nothing
    await store.put_settings(t, "u1", False, now)
    await store.put_candidate(ref3, t, "off", datetime.now(UTC) + timedelta(minutes=5))
    calls = len(seen)
    off = await store.answer_search(agent_filter(t), [ok.id], now, event, drop_candidate=ref3, settings_owner="u1")
    assert off is None and len(seen) == calls
    assert await store.get_candidate(ref3) is None
    await store.put_settings(t, "u1", True, now)
    # No ids, no clauses: still one audited answer with nothing in it.
    empty = ReadFilter(tenant_id=t, clauses=())
    assert await store.answer_search(empty, [ok.id], now, event) == []
    assert seen[-1] == []


async def test_lookups_by_id_go_in_by_primary_key(store: SqlStore, backend: str) -> None:
    """get_many and the re-checks must not walk a tenant's index (25 ms at 100k memories on SQLite)."""
    if backend != "sqlite":
        return  # PostgreSQL's planner has statistics; the `tenant_id || ''` trick is for SQLite's
    t = tenant()
    rec = await store.insert_memory(make_record(t))
    ids = [rec.id, *(str(uuid.uuid4()) for _ in range(7))]  # from about five ids SQLite prefers the tenant index
    executed: list[tuple[str, Any]] = []

    def capture(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_: Any) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            executed.append((statement, parameters))

    for engine in store.statement_engines:
        sa.event.listen(engine, "before_cursor_execute", capture)
    try:
        assert set(await store.get_many(t, ids)) == {rec.id}
        assert set(await store.eligible_meta(agent_filter(t), ids, BASE)) == {rec.id}
        assert [r.id for r in await store.eligible(agent_filter(t), ids, BASE)] == [rec.id]
    finally:
        for engine in store.statement_engines:
            sa.event.remove(engine, "before_cursor_execute", capture)
    assert len(executed) == 3
    for statement, parameters in executed:
        async with store.engine.connect() as conn:
            plan = await conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {statement}", parameters)
            detail = " ".join(str(row[-1]) for row in plan)
        assert "sqlite_autoindex_memories_1" in detail or "PRIMARY KEY" in detail, detail
    assert await store.get_many(tenant(), [rec.id]) == {}


async def test_a_filter_without_clauses_admits_nothing(store: SqlStore) -> None:
    t = tenant()
    rec = await store.insert_memory(make_record(t))
    empty = ReadFilter(tenant_id=t, clauses=())
    assert await store.eligible(empty, [rec.id], BASE) == []
    assert await store.list_memories(empty, limit=10, cursor=None) == ([], None)
    wide = ReadFilter(tenant_id=t, clauses=(NamespaceClause(scope=Scope.USER),))
    assert [r.id for r in await store.eligible(wide, [rec.id], BASE)] == [rec.id]
    assert await store.eligible_meta(empty, [rec.id], BASE) == {}


async def test_bulk_insert_skips_ids_already_present(store: SqlStore) -> None:
    t = tenant()
    first = [make_record(t) for _ in range(3)]
    await store.bulk_insert_memories(first[:1])
    await store.bulk_insert_memories(first)  # the repeated id is skipped, not an error
    got = await store.get_many(t, [r.id for r in first])
    assert set(got) == {r.id for r in first}
    assert got[first[1].id].content == first[1].content


async def test_list_paginates_newest_first_exactly_once(store: SqlStore) -> None:
    t = tenant()
    times = [BASE + timedelta(minutes=m) for m in (0, 5, 5, 5, 9, 2, 7)]  # ties break by id
    rows = [make_record(t, created_at=at, updated_at=at) for at in times]
    excluded = [
        make_record(t, owner_id="u2", created_at=BASE + timedelta(minutes=6)),
        make_record(t, status=Status.SUPERSEDED, created_at=BASE + timedelta(minutes=8)),
    ]
    for rec in [*rows, *excluded]:
        await store.insert_memory(rec)
    rf = ReadFilter(tenant_id=t, clauses=(NamespaceClause(scope=Scope.USER, owner_ids=("u1",)),))
    seen: list[str] = []
    sizes: list[int] = []
    cursor: str | None = None
    for _ in range(10):
        page, cursor = await store.list_memories(rf, limit=3, cursor=cursor)
        sizes.append(len(page))
        seen.extend(r.id for r in page)
        if cursor is None:
            break
    expected = [r.id for r in sorted(rows, key=lambda r: (r.created_at, r.id), reverse=True)]
    assert sizes == [3, 3, 1]
    assert seen == expected
    # statuses come from the filter: asking for superseded too brings it in
    with_history = rf.model_copy(update={"statuses": (Status.ACTIVE, Status.SUPERSEDED)})
    everything, _ = await store.list_memories(with_history, limit=50, cursor=None)
    assert {r.id for r in everything} == {*expected, excluded[1].id}


@pytest.mark.parametrize(
    "cursor",
    [
        "not base64!",
        "%%%",
        base64.urlsafe_b64encode(b"not json").decode(),
        base64.urlsafe_b64encode(b"[1, 2]").decode(),
        base64.urlsafe_b64encode(json.dumps({"c": "2026-01-01T00:00:00+00:00"}).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps({"c": "2026-01-01T00:00:00", "i": "x"}).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps({"c": "yesterday", "i": "x"}).encode()).decode(),
        base64.urlsafe_b64encode(json.dumps({"c": 5, "i": "x"}).encode()).decode(),
        base64.urlsafe_b64encode(b"\xff\xfe").decode(),
    ],
)
async def test_a_malformed_cursor_is_a_value_error(store: SqlStore, cursor: str) -> None:
    rf = ReadFilter(tenant_id=tenant(), clauses=(NamespaceClause(scope=Scope.USER),))
    with pytest.raises(ValueError, match=r"^cursor$"):
        await store.list_memories(rf, limit=3, cursor=cursor)
    with pytest.raises(ValueError, match=r"^cursor$"):
        await store.list_audit(rf.tenant_id, limit=3, cursor=cursor)


# -- status, usage, settings -----------------------------------------------------------------


async def test_set_status_follows_the_machine(store: SqlStore) -> None:
    t = tenant()
    rec = await store.insert_memory(make_record(t, status=Status.PENDING))
    later = BASE + timedelta(hours=1)
    active = await store.set_status(t, rec.id, Status.ACTIVE, expected_version=1, now=later)
    assert active is not None
    assert (active.status, active.version, active.updated_at) == (Status.ACTIVE, 2, later)
    assert await store.get_memory(t, rec.id) == active

    with pytest.raises(InvalidTransition):
        await store.set_status(t, rec.id, Status.PENDING, now=later)
    with pytest.raises(ConcurrencyConflict) as conflict:
        await store.set_status(t, rec.id, Status.STALE, expected_version=1, now=later)
    assert (conflict.value.expected, conflict.value.actual) == (1, 2)
    assert (await store.get_memory(t, rec.id)) == active  # nothing changed

    # already there: a retried activity is harmless
    assert await store.set_status(t, rec.id, Status.ACTIVE, now=later + timedelta(hours=1)) == active

    gone = await store.set_status(t, rec.id, Status.TOMBSTONED, expected_version=2, now=later + timedelta(hours=2))
    assert gone is not None and gone.version == 3 and gone.tombstoned_at == later + timedelta(hours=2)
    purged = await store.set_status(t, rec.id, Status.PURGED, now=later + timedelta(hours=3))
    assert purged is not None and purged.purged_at == later + timedelta(hours=3) and purged.version == 4

    assert await store.set_status(t, "no-such-id", Status.ACTIVE, now=later) is None
    assert await store.set_status(tenant(), rec.id, Status.ACTIVE, now=later) is None


async def test_touch_last_used_updates_only_those_ids(store: SqlStore) -> None:
    t = tenant()
    a = await store.insert_memory(make_record(t))
    b = await store.insert_memory(make_record(t))
    c = await store.insert_memory(make_record(t))
    elsewhere = await store.insert_memory(make_record(tenant()))
    at = BASE + timedelta(days=3)
    await store.touch_last_used(t, [a.id, b.id, elsewhere.id], at)
    await store.touch_last_used(t, [], at)
    got = await store.get_many(t, [a.id, b.id, c.id])
    assert got[a.id].last_used_at == at and got[b.id].last_used_at == at
    assert got[c.id].last_used_at is None
    assert got[a.id].version == 1  # usage is not an edit
    assert (await store.get_memory(elsewhere.tenant_id, elsewhere.id)).last_used_at is None  # type: ignore[union-attr]


async def test_settings_default_on_then_upsert(store: SqlStore) -> None:
    t = tenant()
    assert await store.get_settings(t, "u1") is True
    await store.put_settings(t, "u1", False, BASE)
    assert await store.get_settings(t, "u1") is False
    assert await store.get_settings(t, "u2") is True
    assert await store.get_settings(tenant(), "u1") is True
    await store.put_settings(t, "u1", True, BASE + timedelta(minutes=1))
    assert await store.get_settings(t, "u1") is True
    await store.put_settings(t, "u1", False, BASE + timedelta(minutes=2))
    assert await store.get_settings(t, "u1") is False
    assert await scalar(store, "SELECT count(*) FROM owner_settings WHERE tenant_id = :t", t=t) == 1


# -- claim check -----------------------------------------------------------------------------


async def test_candidates_put_get_delete(store: SqlStore) -> None:
    t = tenant()
    ref = str(uuid.uuid4())
    soon = datetime.now(UTC) + timedelta(hours=1)
    assert await store.get_candidate(ref) is None
    await store.put_candidate(ref, t, "my flight is on friday", soon)
    assert await store.get_candidate(ref) == "my flight is on friday"
    await store.put_candidate(ref, t, "replaced", soon)
    assert await store.get_candidate(ref) == "replaced"
    with pytest.raises(ValueError):
        await store.put_candidate(ref, tenant(), "hijack", soon)
    assert await store.get_candidate(ref) == "replaced"
    await store.delete_candidate(ref)
    assert await store.get_candidate(ref) is None
    await store.delete_candidate(ref)  # idempotent

    stale_ref = str(uuid.uuid4())
    await store.put_candidate(stale_ref, t, "old", datetime.now(UTC) - timedelta(seconds=1))
    assert await store.get_candidate(stale_ref) is None
    assert await store.delete_expired_candidates(datetime.now(UTC)) >= 1
    assert await scalar(store, "SELECT count(*) FROM candidates WHERE ref = :r", r=stale_ref) == 0


async def test_several_candidates_are_read_in_one_statement_live_ones_only(store: SqlStore) -> None:
    """A search reads its parked query and its subject handle together: what is there and not expired."""
    t = tenant()
    soon, past = datetime.now(UTC) + timedelta(hours=1), datetime.now(UTC) - timedelta(seconds=1)
    query, handle, stale, absent = (str(uuid.uuid4()) for _ in range(4))
    await store.put_candidates([(query, t, "what tea", soon), (handle, t, '{"a":1}', soon), (stale, t, "old", past)])
    assert await store.get_candidates([query, handle, stale, absent]) == {query: "what tea", handle: '{"a":1}'}
    assert await store.get_candidates([absent]) == {}
    await store.delete_candidate(query)
    assert await store.get_candidates([query, handle]) == {handle: '{"a":1}'}


# -- audit -----------------------------------------------------------------------------------


def audit_event(t: str, n: int, **overrides: Any) -> AuditEventIn:
    fields: dict[str, Any] = {
        "tenant_id": t,
        "actor": "agent:a1",
        "operation": "create_memory",
        "memory_id": f"m{n % 2}",
        "namespace": "user:u1",
        "reason": "user_explicit_preference",
        "at": BASE + timedelta(seconds=n, microseconds=n),
        "details": {"decision": "ADD", "n": n, "score": 0.5, "ids": ["x", "y"], "nested": {"b": 1, "a": None}},
    }
    fields.update(overrides)
    return AuditEventIn(**fields)


async def test_audit_chain_verifies_lists_and_detects_tampering(backend: str, tmp_path: Path) -> None:
    async with fresh_store(backend, tmp_path) as store:
        assert await store.verify_audit() == (True, None)
        t, other = tenant(), tenant()
        events = [audit_event(t if n != 2 else other, n) for n in range(6)]
        ids = [await store.append_audit(e) for e in events]
        assert ids == [e.id for e in events]
        assert await store.append_audit(events[1]) == events[1].id  # retried: not appended twice
        assert await scalar(store, "SELECT count(*) FROM audit_events") == 6
        assert await store.verify_audit() == (True, None)

        page, cursor = await store.list_audit(t, limit=3, cursor=None)
        rest, end = await store.list_audit(t, limit=3, cursor=cursor)
        assert end is None
        listed = [*page, *rest]
        assert [e.id for e in listed] == [e.id for e in reversed(events) if e.tenant_id == t]
        first = listed[-1]
        assert first.prev_hash == GENESIS_HASH and first.hash == chain_hash(GENESIS_HASH, events[0])
        assert first.at == events[0].at and first.details == events[0].details
        only_m1, _ = await store.list_audit(t, memory_id="m1", limit=10, cursor=None)
        assert [e.id for e in only_m1] == [e.id for e in reversed(events) if e.tenant_id == t and e.memory_id == "m1"]

        seqs = [e.seq for e in reversed(listed)]
        async with store.engine.begin() as conn:
            await conn.execute(sa.text("UPDATE audit_events SET reason = 'edited' WHERE seq = :s"), {"s": seqs[2]})
        assert await store.verify_audit() == (False, seqs[2])


async def test_audit_rewriting_a_row_and_its_hash_breaks_the_next_link(backend: str, tmp_path: Path) -> None:
    async with fresh_store(backend, tmp_path) as store:
        t = tenant()
        for n in range(4):
            await store.append_audit(audit_event(t, n))
        (events, _) = await store.list_audit(t, limit=10, cursor=None)
        victim = events[-2]  # the second event
        forged = victim.model_copy(update={"actor": "operator:mallory"})
        forged_hash = chain_hash(victim.prev_hash, forged)
        async with store.engine.begin() as conn:
            await conn.execute(
                sa.text("UPDATE audit_events SET actor = 'operator:mallory', hash = :h WHERE seq = :s"),
                {"h": forged_hash, "s": victim.seq},
            )
        assert await store.verify_audit() == (False, victim.seq + 1)
        async with store.engine.begin() as conn:
            await conn.execute(sa.text("DELETE FROM audit_events WHERE seq = :s"), {"s": victim.seq})
        assert await store.verify_audit() == (False, victim.seq + 1)


async def test_concurrent_audit_appends_never_fork_the_chain(backend: str, tmp_path: Path) -> None:
    async with database(backend, tmp_path) as (url, schema):
        writers = [await SqlStore.open(url, schema=schema) for _ in range(2)]
        try:
            await writers[0].migrate()
            t = tenant()
            events = [audit_event(t, n) for n in range(20)]
            await asyncio.gather(*(writers[n % 2].append_audit(e) for n, e in enumerate(events)))
            assert await writers[0].verify_audit() == (True, None)
            async with writers[1].engine.connect() as conn:
                rows = (await conn.execute(sa.text("SELECT prev_hash, hash FROM audit_events ORDER BY seq"))).all()
            assert len(rows) == 20
            assert len({r.prev_hash for r in rows}) == 20  # no two events share a parent
            assert [r.prev_hash for r in rows[1:]] == [r.hash for r in rows[:-1]]
        finally:
            for w in writers:
                await w.close()


def test_audit_details_refuse_content() -> None:
    with pytest.raises(ValidationError):
        AuditEventIn(tenant_id="t", actor="a", operation="o", details={"content": "my secret"})
    with pytest.raises(ValidationError):
        AuditEventIn(tenant_id="t", actor="a", operation="o", details={"hits": [{"Query": "x"}]})
    with pytest.raises(ValidationError):
        AuditEventIn(tenant_id="t", actor="a", operation="o", details={"score": float("nan")})
    with pytest.raises(ValidationError):
        AuditEventIn(tenant_id="t", actor="a", operation="o", at=datetime(2026, 1, 1))
