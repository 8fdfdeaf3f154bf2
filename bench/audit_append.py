"""Audit-chain appends per second on PostgreSQL, 1 writer against 8 (side by side in one run).

    nice -n 10 .venv/bin/python -m bench.audit_append --postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test \
        [--publish]

Every Remember decision appends one event to the audit hash chain, and `SqlStore.append_audit`
serializes appends (one PostgreSQL advisory transaction lock for the whole chain) so the chain never
forks. That makes the chain a global write ceiling whatever the number of workers: this measures it
in a schema of its own (dropped afterwards).
"""

from __future__ import annotations

import argparse
import asyncio
import time
import uuid

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from bench import report
from memwarden.stores.audit import AuditEventIn
from memwarden.stores.sql import SqlStore


async def appends(store: SqlStore, writers: int, per_writer: int) -> float:
    async def writer(w: int) -> None:
        for i in range(per_writer):
            await store.append_audit(
                AuditEventIn(tenant_id=f"t{w % 4}", actor="bench", operation="create", memory_id=f"m{w}-{i}")
            )

    began = time.perf_counter()
    await asyncio.gather(*(writer(w) for w in range(writers)))
    return writers * per_writer / (time.perf_counter() - began)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres", required=True)
    parser.add_argument("--per-writer", type=int, default=150)
    parser.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    args = parser.parse_args()
    rows: list[list[object]] = []
    schema = f"mw_bench_audit_{uuid.uuid4().hex[:10]}"
    admin = create_async_engine(args.postgres, isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
    store = await SqlStore.open(args.postgres, schema=schema)
    try:
        await store.migrate()
        await appends(store, 1, 20)  # warm-up
        print("| writers | appends | appends/s |")
        print("|---|---|---|")
        for writers in (1, 8):
            rate = await appends(store, writers, args.per_writer)
            print(f"| {writers} | {writers * args.per_writer} | {rate:.0f} |", flush=True)
            rows.append([writers, writers * args.per_writer, f"{rate:.0f}"])
        ok, bad = await store.verify_audit()
        print(f"chain verifies: {ok} (first bad seq: {bad})")
        if args.publish:
            table = report.table(["writers", "appends", "appends/s"], rows)
            report.publish("audit_append", f"{table}\n\nThe chain verifies afterwards: {ok}.")
    finally:
        await store.close()
        async with admin.connect() as conn:
            await conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        await admin.dispose()


if __name__ == "__main__":
    asyncio.run(main())
