"""Engines, connections and transactions: what differs between SQLite and PostgreSQL lives here.

The rest of the store asks for a transaction and runs the same statements on both dialects, in one of two
forms. `_read()` / `_write()` yield an `AsyncConnection`, one `await` per statement. `_query(body)` /
`_transact(body)` run `body`, a plain function of a `Connection`, as one whole read or write transaction:
on PostgreSQL through `AsyncConnection.run_sync` (asyncpg, each statement awaited as before); on SQLite
in one trip to a thread of the store's own, on a `sqlite3` connection, because each statement through
aiosqlite costs three or four hops between the event loop and aiosqlite's thread, and a hop waits for
the GIL behind whatever the worker is doing (`docs/decisions/sqlite-transactions-in-one-trip.md`). The
operations' hot paths use the second form; helpers that both forms share are plain functions of a
`Connection`, called from the first through `run_sync`.
Writes are serialized where they must be: every SQLite write transaction is `BEGIN IMMEDIATE` (the
database write lock, across processes), and migrations take a PostgreSQL advisory lock, so two
processes may migrate at once.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import weakref
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from sqlalchemy import event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from memwarden.file_modes import private_dir, private_file

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"

_IMMEDIATE = "memwarden_sqlite_immediate"
"""Execution option: open this SQLite transaction with BEGIN IMMEDIATE (take the write lock now)."""
_AUTOCOMMIT_READ = "memwarden_sqlite_autocommit_read"
"""Execution option: a read of one statement (or of independent chunks) runs in SQLite's autocommit mode.
A single SELECT is its own consistent snapshot; an explicit BEGIN would add a statement round trip per
read (a thread hop each under aiosqlite)."""

_MIGRATE_LOCK_KEY = 0x6D77_6D69_6772_6174
"""pg_advisory_xact_lock key held while migrating ("mwmigrat")."""
_MIGRATE_SQLITE_ATTEMPTS = 12
"""Attempts, each waiting up to the 5 s busy timeout: about a minute for another process's migration."""
_PING_TIMEOUT = 2.0
_SQLITE_THREADS = 4
"""Threads that run a SQLite store's whole transactions (`_query`, `_transact`): one writer at a time
holds the write lock, the others read beside it (WAL)."""

T = TypeVar("T")

# aiosqlite logs every call at DEBUG with its arguments, SQL parameters (memory content) included, and
# `hide_parameters` covers only SQLAlchemy's own records: those records are never created, whatever
# level the application's root logger is at.
logging.getLogger("aiosqlite").setLevel(logging.INFO)


async def create_engine(url: str, *, schema: str | None = None) -> AsyncEngine:
    """The engine for an async URL (sqlite+aiosqlite or postgresql+asyncpg).

    `schema` (PostgreSQL only) puts every table in that schema via the search_path.
    """
    sa_url = make_url(url)
    backend = sa_url.get_backend_name()
    if backend == "sqlite":
        if schema is not None:
            raise ValueError("schema is a PostgreSQL option")
        if sa_url.drivername == "sqlite":
            sa_url = sa_url.set(drivername="sqlite+aiosqlite")
        database = sa_url.database or ""
        if database in ("", ":memory:") or database.startswith("file:"):
            raise ValueError("SQLite needs a file path (in-memory databases are per-connection)")
        await asyncio.to_thread(_ensure_parent_dir, database)
        # Reset on return is ours (`_sqlite_on_reset`): the pool's own would send a ROLLBACK through
        # aiosqlite's thread for every connection returned, inside a transaction or not.
        engine = create_async_engine(sa_url, hide_parameters=True, pool_reset_on_return=None)
        event.listen(engine.sync_engine, "connect", _sqlite_on_connect)
        event.listen(engine.sync_engine, "begin", _sqlite_on_begin)
        event.listen(engine.sync_engine, "reset", _sqlite_on_reset)
    elif backend == "postgresql":
        if sa_url.drivername == "postgresql":
            sa_url = sa_url.set(drivername="postgresql+asyncpg")
        connect_args: dict[str, Any] = {}
        if schema is not None:
            connect_args["server_settings"] = {"search_path": schema}
        engine = create_async_engine(
            sa_url,
            pool_size=5,
            max_overflow=5,
            pool_pre_ping=True,
            pool_recycle=1800,
            connect_args=connect_args,
            hide_parameters=True,  # a failed statement's exception must not carry content or a query
        )
    else:
        raise ValueError(f"unsupported database backend: {backend}")
    return engine


class SqlEngine:
    """The engine(s) of one store, and the read and write connections every part of it runs on."""

    def __init__(self, engine: AsyncEngine) -> None:
        self._engine = engine
        self._write_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )
        self._sqlite: tuple[sa.Engine, ThreadPoolExecutor] | None = None
        self._sqlite_guard = threading.Lock()

    @property
    def engine(self) -> AsyncEngine:
        """The underlying engine, for code that needs a query this repository does not offer."""
        return self._engine

    @property
    def statement_engines(self) -> tuple[sa.Engine, ...]:
        """Every synchronous engine this store's statements run on (for event listeners: tests, tracing)."""
        if self.dialect != "sqlite":
            return (self._engine.sync_engine,)
        return (self._engine.sync_engine, self._sqlite_side()[0])

    @property
    def dialect(self) -> str:
        """'sqlite' or 'postgresql': the few places that differ (upserts, locks) branch on it."""
        return self._engine.dialect.name

    async def migrate(self) -> None:
        """Upgrade to the newest schema; a no-op when current; safe from several processes at once.

        Three locks: one per process around Alembic (its `context`/`op` are process globals, so
        two migrations interleaving on one event loop would cross wires), then the database's
        own: PostgreSQL's advisory transaction lock, or SQLite's write lock (BEGIN IMMEDIATE),
        taken before Alembic reads the version table. A SQLite lock wait that outlasts the busy
        timeout (another process running a long migration) is retried.
        """
        async with _alembic_guard():
            for attempt in range(_MIGRATE_SQLITE_ATTEMPTS):
                try:
                    async with self._write() as conn:
                        if self.dialect == "postgresql":
                            await conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _MIGRATE_LOCK_KEY})
                        else:
                            await conn.execute(sa.text("SELECT 1"))  # BEGIN IMMEDIATE happens here
                        await conn.run_sync(_upgrade_head)
                    return
                except OperationalError as exc:
                    locked = self.dialect == "sqlite" and "locked" in str(exc.orig)
                    if not locked or attempt == _MIGRATE_SQLITE_ATTEMPTS - 1:
                        raise

    async def close(self) -> None:
        await self._engine.dispose()
        with self._sqlite_guard:
            sqlite_side, self._sqlite = self._sqlite, None
        if sqlite_side is not None:
            engine, threads = sqlite_side
            await asyncio.to_thread(threads.shutdown)
            engine.dispose()

    async def ping(self) -> bool:
        """Readiness: True when a trivial query answers within `_PING_TIMEOUT` seconds."""
        try:
            async with asyncio.timeout(_PING_TIMEOUT), self._engine.connect() as conn:
                await conn.execute(sa.text("SELECT 1"))
        except Exception:  # any failure means "not ready"; callers only need the boolean
            return False
        return True

    @asynccontextmanager
    async def _read(self, *, single_statement: bool = False) -> AsyncIterator[AsyncConnection]:
        """A read connection; `single_statement`: the caller runs one statement (or chunks that need no
        common snapshot), so on SQLite no transaction is opened for it."""
        async with self._engine.connect() as conn:
            if single_statement:
                await conn.execution_options(**{_AUTOCOMMIT_READ: True})
            yield conn

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConnection]:
        """One write transaction; on SQLite it holds the write lock from its first statement.

        SQLite has one writer at a time. Writers of this process queue on an asyncio lock first, so the
        next one starts the moment the last commits; left to SQLite's busy handler they would each sleep
        in steps of up to 100 ms in a pool thread and, under load, wait out the busy timeout. Other
        processes are still kept out by BEGIN IMMEDIATE and the busy timeout.

        """
        if self.dialect != "sqlite":
            async with self._engine.connect() as conn, conn.begin():
                yield conn
            return
        async with self._write_lock(), self._engine.connect() as conn:
            await conn.execution_options(**{_IMMEDIATE: True})
            async with conn.begin():
                yield conn

    async def _query(self, body: Callable[[Connection], T], *, single_statement: bool = False) -> T:
        """`body(conn)` as one read (`single_statement` as in `_read`); on SQLite in one trip to a thread."""
        if self.dialect != "sqlite":
            async with self._read(single_statement=single_statement) as conn:
                return await conn.run_sync(body)
        options = {_AUTOCOMMIT_READ: True} if single_statement else {}
        return await self._in_thread(body, options)

    async def _transact(self, body: Callable[[Connection], T]) -> T:
        """`body(conn)` as one write transaction, committed when it returns and rolled back when it raises;
        on SQLite in one trip to a thread, queued behind this process's other writers as `_write` is."""
        if self.dialect != "sqlite":
            async with self._write() as conn:
                return await conn.run_sync(body)
        async with self._write_lock():
            return await self._in_thread(body, {_IMMEDIATE: True})

    async def _in_thread(self, body: Callable[[Connection], T], options: dict[str, bool]) -> T:
        """`_sqlite_run(body)` on one of the store's threads."""
        engine, threads = self._sqlite_side()
        return await asyncio.get_running_loop().run_in_executor(
            threads, functools.partial(_sqlite_run, engine, body, options)
        )

    def _sqlite_side(self) -> tuple[sa.Engine, ThreadPoolExecutor]:
        """The synchronous engine on the same database file, and the threads that use it (made on first use)."""
        with self._sqlite_guard:
            if self._sqlite is None:
                url = self._engine.url.set(drivername="sqlite+pysqlite")
                engine = sa.create_engine(
                    url,
                    hide_parameters=True,
                    pool_reset_on_return=None,
                    pool_size=_SQLITE_THREADS,
                    connect_args={"check_same_thread": False},  # a pooled connection serves any of our threads
                )
                event.listen(engine, "connect", _sqlite_on_connect)
                event.listen(engine, "begin", _sqlite_on_begin)
                event.listen(engine, "reset", _sqlite_on_reset)
                threads = ThreadPoolExecutor(_SQLITE_THREADS, thread_name_prefix="memwarden-sqlite")
                self._sqlite = (engine, threads)
            return self._sqlite

    def _write_lock(self) -> asyncio.Lock:
        """This event loop's SQLite writer lock (a store may outlive one loop, as in tests)."""
        loop = asyncio.get_running_loop()
        lock = self._write_locks.get(loop)
        if lock is None:
            lock = self._write_locks[loop] = asyncio.Lock()
        return lock

    def transaction(self) -> Any:
        """One write transaction (SQLite: holding the write lock), for repositories built on this store."""
        return self._write()

    def insert(self, table: sa.Table) -> sqlite.Insert | postgresql.Insert:
        """The dialect's INSERT with ON CONFLICT, for repositories built on this store."""
        return self._insert(table)

    def _insert(self, table: sa.Table) -> sqlite.Insert | postgresql.Insert:
        """The dialect's INSERT, which has ON CONFLICT on both SQLite and PostgreSQL."""
        return postgresql.insert(table) if self.dialect == "postgresql" else sqlite.insert(table)


_ALEMBIC_LOCK = threading.Lock()


@asynccontextmanager
async def _alembic_guard() -> AsyncIterator[None]:
    """Process-wide mutual exclusion for Alembic, usable from any event loop or thread.

    Polls a non-blocking acquire so a cancelled waiter never ends up holding the lock.
    """
    # not an asyncio.Event: those belong to one loop, and this must hold across loops and threads
    while not _ALEMBIC_LOCK.acquire(blocking=False):  # noqa: ASYNC110
        await asyncio.sleep(0.01)
    try:
        yield
    finally:
        _ALEMBIC_LOCK.release()


def _upgrade_head(connection: Connection) -> None:
    """Alembic upgrade on a connection that is already inside the locked migration transaction."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    config.attributes["connection"] = connection
    command.upgrade(config, "head")


def _ensure_parent_dir(database: str) -> None:
    """The database's dir, and the file itself created 0600 before SQLite opens it (SQLite gives its
    -wal and -shm the database file's mode), so no memory is ever in a world-readable file."""
    path = Path(database).expanduser()
    parent = path.parent
    if not parent.exists():
        private_dir(parent)
    private_file(path)


def _sqlite_on_connect(dbapi_connection: Any, _record: Any) -> None:
    """Per-connection SQLite settings; transactions are begun by us (see `_sqlite_on_begin`)."""
    dbapi_connection.isolation_level = None
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA busy_timeout=5000")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA secure_delete=ON")
    finally:
        cursor.close()


def _sqlite_on_reset(dbapi_connection: Any, _record: Any, _state: Any) -> None:
    """A connection back in the pool is rolled back only when it is inside a transaction.

    A single-statement read opens none (`_AUTOCOMMIT_READ`), and a write has committed or rolled back
    by the time its connection returns, so for most connections there is nothing to end; the check
    reads sqlite3's own flag, without a round trip through aiosqlite's thread.
    """
    if getattr(dbapi_connection, "driver_connection", dbapi_connection).in_transaction:
        dbapi_connection.rollback()


def _sqlite_run(engine: sa.Engine, body: Callable[[Connection], T], options: dict[str, bool]) -> T:
    """In a store thread: `body` in one transaction (or, for a single-statement read, none)."""
    with engine.connect() as conn:
        conn = conn.execution_options(**options)
        if options.get(_AUTOCOMMIT_READ):
            return body(conn)
        with conn.begin():
            return body(conn)


def _sqlite_on_begin(conn: Connection) -> None:
    """Writes take the database lock up front, so read-then-write never races another process; a
    single-statement read opens no transaction at all (`_AUTOCOMMIT_READ`)."""
    options = conn.get_execution_options()
    if options.get(_AUTOCOMMIT_READ):
        return
    conn.exec_driver_sql("BEGIN IMMEDIATE" if options.get(_IMMEDIATE) else "BEGIN")
