"""SQLite for SQLAlchemy's asyncio engine without a thread hop per statement.

Why: aiosqlite runs every statement on a connection thread and wakes the event loop for each
result. A statement on a local WAL database takes tens of microseconds; the two hops around it cost
~0.3 ms of the event loop's time each, and under load they queue on the GIL behind everything else.
A write to memory is ~13 statements, a search ~5, so the hops were a fifth of the loop's work.

This module gives SQLAlchemy's aiosqlite dialect (via `async_creator`) a connection with aiosqlite's
interface that runs on the calling thread whatever cannot wait, and on a thread only what can:

- `BEGIN IMMEDIATE` / `EXCLUSIVE` when another process holds the write lock (tried inline first,
  without waiting; on a thread it waits for the lock, up to the busy timeout);
- a write outside a transaction that holds the write lock (it may wait for that lock too);
- `COMMIT` on a durable connection (the fsync);
- `executemany` (bulk loads: long, and nothing else should wait behind them).

Reads never wait in WAL mode, nor do writes inside a transaction that already holds the write lock,
so those run inline: blocking the loop for their few microseconds is cheaper than the hop.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any

_LOCKING_BEGIN = ("BEGIN IMMEDIATE", "BEGIN EXCLUSIVE")
_READS = ("SELECT", "PRAGMA", "BEGIN", "SAVEPOINT", "RELEASE")
"""Statement heads that take no write lock (a deferred BEGIN takes none until its first write); anything else
runs on a thread unless its transaction holds the write lock already."""


def _head(sql: str) -> str:
    """A statement's first words, upper-cased: enough to tell a BEGIN, a read or a COMMIT."""
    return sql.lstrip()[:16].upper()


class _Immediate:
    """Stands in for aiosqlite's request queue: SQLAlchemy's isolation-level setter puts a function on it."""

    def put_nowait(self, item: tuple[asyncio.Future[Any], Callable[[], Any]]) -> None:
        future, function = item
        try:
            future.set_result(function())
        except Exception as exc:  # handed back to the awaiting caller, as aiosqlite would
            future.set_exception(exc)


class InlineCursor:
    """aiosqlite's cursor interface over a sqlite3 cursor (see the module docstring for what runs where)."""

    def __init__(self, owner: InlineConnection, cursor: sqlite3.Cursor) -> None:
        self._owner = owner
        self._cursor = cursor

    @property
    def description(self) -> Any:
        return self._cursor.description

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid

    @property
    def arraysize(self) -> int:
        return self._cursor.arraysize

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self._cursor.arraysize = value

    async def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = ()) -> InlineCursor:
        await self._owner.run(sql, lambda: self._cursor.execute(sql, parameters))
        return self

    async def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> InlineCursor:
        rows = list(seq)
        await asyncio.to_thread(self._cursor.executemany, sql, rows)
        self._owner.after(_head(sql))
        return self

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        return self._cursor.fetchmany(size if size is not None else self._cursor.arraysize)

    async def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    async def close(self) -> None:
        self._cursor.close()

    async def nextset(self) -> None:
        return None

    async def __aenter__(self) -> InlineCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class InlineConnection:
    """aiosqlite's connection interface over one sqlite3 connection (opened with check_same_thread=False,
    since the statements that may wait run on a pool thread)."""

    def __init__(self, conn: sqlite3.Connection, *, durable: bool) -> None:
        self._conn = conn
        self._connection: sqlite3.Connection | None = conn  # SQLAlchemy's adapter tests it before commit
        self._tx = _Immediate()
        self._durable = durable
        self._holds_write_lock = False
        self._busy_timeout: int | None = None

    @property
    def isolation_level(self) -> str | None:
        return self._conn.isolation_level

    async def run(self, sql: str, call: Callable[[], Any]) -> None:
        """Run one statement inline when it cannot wait for a lock, else on a thread.

        `BEGIN IMMEDIATE` is tried inline first with no busy timeout: the lock is almost always free
        (this process's writers queue on an asyncio lock before it), and only when another process
        holds it does the statement go to a thread to wait, with the connection's busy timeout."""
        head = _head(sql)
        if head.startswith(_LOCKING_BEGIN):
            if not self._try_without_waiting(call):
                await asyncio.to_thread(call)
        elif self._holds_write_lock or head.startswith(_READS):
            call()
        else:
            await asyncio.to_thread(call)
        self.after(head)

    def _try_without_waiting(self, call: Callable[[], Any]) -> bool:
        """Run `call` with a zero busy timeout; False (nothing done) when the database was locked."""
        if self._busy_timeout is None:  # set on connect (SqlStore's listener), after this object exists
            (self._busy_timeout,) = self._conn.execute("PRAGMA busy_timeout").fetchone()
        self._conn.execute("PRAGMA busy_timeout=0")
        try:
            call()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                raise
            return False
        finally:
            self._conn.execute(f"PRAGMA busy_timeout={int(self._busy_timeout)}")
        return True

    def after(self, head: str) -> None:
        """Track the write lock from the statement just run (`head`: its first words, upper-cased)."""
        if head.startswith(_LOCKING_BEGIN):
            self._holds_write_lock = True
        elif head.startswith(("COMMIT", "ROLLBACK", "END")) or not self._conn.in_transaction:
            self._holds_write_lock = False

    def cursor(self) -> InlineCursor:
        """Sync, as SQLAlchemy's adapter enters it with `async with` (aiosqlite's returns a context manager)."""
        return InlineCursor(self, self._conn.cursor())

    async def execute(self, sql: str, parameters: Sequence[Any] | dict[str, Any] = ()) -> InlineCursor:
        return await self.cursor().execute(sql, parameters)

    async def commit(self) -> None:
        if self._durable and self._conn.in_transaction:
            await asyncio.to_thread(self._conn.commit)
        else:
            self._conn.commit()
        self._holds_write_lock = False

    async def rollback(self) -> None:
        self._conn.rollback()
        self._holds_write_lock = False

    async def create_function(self, *args: Any, **kwargs: Any) -> None:
        self._conn.create_function(*args, **kwargs)

    async def close(self) -> None:
        self.stop()

    def stop(self) -> None:
        """Close at once (also SQLAlchemy's terminate); idempotent."""
        if self._connection is not None:
            self._connection = None
            self._conn.close()


def inline_creator(database: str, *, durable: bool) -> Callable[[], Any]:
    """The `async_creator` for `create_async_engine("sqlite+aiosqlite://...", async_creator=...)`."""

    async def connect() -> InlineConnection:
        conn = await asyncio.to_thread(sqlite3.connect, database, check_same_thread=False, isolation_level=None)
        return InlineConnection(conn, durable=durable)

    return connect
