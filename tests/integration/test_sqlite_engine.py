"""SQLite through SQLAlchemy's aiosqlite engine over real files: what the store's transactions promise.

A writer waiting for another connection's lock never stops the event loop, writes take the lock up
front (BEGIN IMMEDIATE), and a single-statement read opens no transaction.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa

from memwarden.stores.sql import SqlStore


async def _store(path: Path) -> SqlStore:
    store = await SqlStore.open(f"sqlite+aiosqlite:///{path}")
    await store.migrate()
    return store


async def test_a_writer_waiting_for_another_connections_lock_does_not_stop_the_event_loop(tmp_path: Path) -> None:
    """Two stores on one file (as two processes would be): B's BEGIN IMMEDIATE waits for A's open write
    transaction in a thread, so the loop keeps running A to its commit, and then B's write lands."""
    db = tmp_path / "locks.db"
    a, b = await _store(db), await _store(db)
    try:
        holding, release = asyncio.Event(), asyncio.Event()
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while not release.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        async def writer_a() -> None:
            async with a.transaction() as conn:
                await conn.execute(sa.text("UPDATE owner_settings SET memory_enabled = memory_enabled WHERE 1 = 0"))
                holding.set()
                await release.wait()

        task_a = asyncio.create_task(writer_a())
        await asyncio.wait_for(holding.wait(), 10)
        tick = asyncio.create_task(ticker())
        write_b = asyncio.create_task(b.put_settings("t-locks", "alice", False, datetime.now(UTC)))
        await asyncio.sleep(0.3)
        assert not write_b.done()  # B waits for the lock A holds...
        assert ticks >= 10  # ...without stopping the loop (inline, it would block it for the busy timeout)
        release.set()
        await asyncio.wait_for(asyncio.gather(task_a, write_b, tick), 10)
        assert await a.get_settings("t-locks", "alice") is False
    finally:
        await a.close()
        await b.close()


async def test_single_statement_reads_open_no_transaction_and_writes_still_do(tmp_path: Path) -> None:
    """A read of one statement is its own snapshot: no BEGIN round trip before it (nor after a write)."""
    from datetime import timedelta

    store = await _store(tmp_path / "reads.db")
    executed: list[str] = []

    def capture(_conn: object, _cursor: object, statement: str, *_: object) -> None:
        executed.append(" ".join(statement.split()).upper())

    for engine in store.statement_engines:
        sa.event.listen(engine, "before_cursor_execute", capture)
    try:
        expires = datetime.now(UTC) + timedelta(days=1)
        await store.put_candidates([("ref-1", "t-1", "synthetic: parked", expires)])
        await store.put_settings("t-1", "o-1", False, datetime.now(UTC))
        assert any(s.startswith("BEGIN IMMEDIATE") for s in executed)  # writes still take the lock first
        executed.clear()
        assert await store.screen_inputs("t-1", "o-1", "ref-1", None) == (False, "synthetic: parked", False)
        assert await store.get_candidate("ref-1") == "synthetic: parked"
        assert await store.get_settings("t-1", "o-1") is False
        assert await store.get_memory("t-1", "absent") is None
        assert await store.get_many("t-1", ["absent"]) == {}
        assert len(executed) == 5, executed
        assert not any(s.startswith("BEGIN") for s in executed), executed
    finally:
        for engine in store.statement_engines:
            sa.event.remove(engine, "before_cursor_execute", capture)
        await store.close()


async def test_a_committed_write_returns_its_connection_without_another_rollback(tmp_path: Path) -> None:
    """The pool's reset is ours (`_sqlite_on_reset`): after a commit there is nothing to end, so no
    ROLLBACK goes through aiosqlite's thread (the pool's default reset would send one for every
    connection returned); a connection returned inside a transaction is still ended."""
    store = await _store(tmp_path / "reset.db")
    rollbacks = 0
    async with store.transaction() as conn:  # the one pooled connection, its rollbacks counted
        driver = conn.sync_connection.connection.driver_connection  # type: ignore[union-attr]
        await conn.execute(sa.text("SELECT 1"))
    real_rollback = driver.rollback

    async def counted() -> None:
        nonlocal rollbacks
        rollbacks += 1
        await real_rollback()

    driver.rollback = counted
    try:
        await store.put_settings("t-1", "o-1", False, datetime.now(UTC))
        await store.put_settings("t-1", "o-2", True, datetime.now(UTC))
        assert rollbacks == 0
        async with store._read() as conn:  # a read of several statements holds a snapshot: BEGIN
            await conn.execute(sa.text("SELECT 1"))
            assert driver.in_transaction
        assert rollbacks == 1 and not driver.in_transaction
        assert await store.get_settings("t-1", "o-1") is False
    finally:
        await store.close()


async def test_no_log_record_carries_a_parameter_even_at_debug(tmp_path: Path) -> None:
    """aiosqlite logs each call with its arguments at DEBUG: the store keeps those records from existing,
    so a root logger at DEBUG (an operator chasing a bug) still never sees what was written."""
    import logging
    from datetime import timedelta

    marker = "synthetic-marker-zq7vlx"
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    root = logging.getLogger()
    handler, level = Keep(level=logging.DEBUG), root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        store = await _store(tmp_path / "logs.db")
        try:
            expires = datetime.now(UTC) + timedelta(days=1)
            await store.put_candidates([("ref-1", "t-1", marker, expires)])
            assert await store.get_candidate("ref-1") == marker
        finally:
            await store.close()
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
    assert records  # the handler saw the store's work (alembic's at least)
    assert not [r.name for r in records if marker in r.getMessage()]
