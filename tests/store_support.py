"""A fresh durable store for a test: a SQLite file, or a PostgreSQL schema of its own (dropped after);
or a PostgreSQL database of its own, for what opens the store itself (a stack, a bench).

Not collected by pytest. Shared by the store-level Forget tests and the sink contract, whose
fixtures differ only in scope and parameters, the chaos tests and bench/scale.py.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from memwarden.stores.sql import SqlStore
from tests.conftest import service_url


@asynccontextmanager
async def fresh_store(
    backend: str, directory: Path, *, schema_prefix: str = "mw_test", **options: Any
) -> AsyncIterator[SqlStore]:
    """`backend` "sqlite" (a file in `directory`) or "postgresql" (MEMWARDEN_TEST_POSTGRES_URL), migrated;
    `options` go to `SqlStore.open` (a signer, pseudonyms)."""
    if backend == "sqlite":
        store = await SqlStore.open(f"sqlite+aiosqlite:///{directory / 'mw.db'}", **options)
        await store.migrate()
        try:
            yield store
        finally:
            await store.close()
        return
    url = service_url("MEMWARDEN_TEST_POSTGRES_URL")
    schema = f"{schema_prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(url, isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    store = await SqlStore.open(url, schema=schema, **options)
    try:
        await store.migrate()
        yield store
    finally:
        await store.close()
        async with admin.connect() as conn:
            await conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        await admin.dispose()


@asynccontextmanager
async def temporary_database(url: str, prefix: str) -> AsyncIterator[str]:
    """A PostgreSQL database of the caller's own next to `url`'s (CREATE DATABASE, dropped after with every
    connection still open to it): its async URL."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(url, isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(url).set(database=name).render_as_string(hide_password=False)
    finally:
        async with admin.connect() as conn:
            await conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()
