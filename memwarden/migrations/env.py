"""Alembic environment for memwarden's durable store.

At run time `SqlStore.migrate()` hands over a live (sync-facing) connection in
`config.attributes["connection"]`, already inside the transaction that holds the migration lock,
so this file only configures the context and runs the scripts. Without one (authoring from the
command line, see alembic.ini) it opens the `-x url=...` database with an async engine.
"""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import create_async_engine

from memwarden.stores.sql_models import metadata

config = context.config


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_url(url: str) -> None:
    engine = create_async_engine(url, hide_parameters=True)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_run)
    finally:
        await engine.dispose()


def _main() -> None:
    if context.is_offline_mode():
        raise RuntimeError("memwarden migrations run online only (SqlStore.migrate or -x url=...)")
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database: pass -x url=<sqlalchemy async url>")
    asyncio.run(_run_url(url))


_main()
