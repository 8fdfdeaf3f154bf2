"""Audit chain throughput: appends (one writer and several at once), with and without checkpoints, and verification.

    .venv/bin/python -m bench.audit_bench [--events 2000] [--postgres-url postgresql+asyncpg://...] [--publish]

Every append takes the chain's lock (SQLite's write lock, or a PostgreSQL advisory lock), reads the
head and inserts one row; a checkpoint adds a count and an Ed25519 signature every N events. All
figures of one backend come from the same run, side by side. SQLite runs in a temporary file;
PostgreSQL (when a URL is given) in a temporary schema that is dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from bench import report
from memwarden.audit_signing import CheckpointSigner
from memwarden.stores.audit import AuditEventIn
from memwarden.stores.sql import SqlStore


def event(n: int) -> AuditEventIn:
    return AuditEventIn(
        tenant_id="bench",
        actor="agent:bench",
        operation="read",
        memory_id=str(uuid.uuid4()),
        workflow_id=f"retrieve-{n}",
        details={"returned": [str(uuid.uuid4()) for _ in range(5)], "withheld": []},
    )


async def run(url: str, schema: str | None, events: int, every: int | None, writers: int) -> dict[str, float]:
    signer = CheckpointSigner.from_base64(CheckpointSigner.generate_base64()) if every else None
    store = await SqlStore.open(url, schema=schema, audit_signer=signer, checkpoint_every=every or 256)
    await store.migrate()
    try:
        latencies: list[float] = []

        async def writer(w: int) -> None:
            for n in range(w, events, writers):
                start = time.perf_counter()
                await store.append_audit(event(n))
                latencies.append(time.perf_counter() - start)

        started = time.perf_counter()
        await asyncio.gather(*(writer(w) for w in range(writers)))
        elapsed = time.perf_counter() - started
        verify_start = time.perf_counter()
        result = await store.verify_audit_chain(None if signer is None else _verifier(signer))
        verify = time.perf_counter() - verify_start
        assert result.ok, result
        latencies.sort()
        return {
            "appends_per_s": events / elapsed,
            "p50_ms": statistics.median(latencies) * 1000,
            "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
            "verify_events_per_s": result.events / verify,
        }
    finally:
        await store.close()


def _verifier(signer: CheckpointSigner):  # type: ignore[no-untyped-def]
    from memwarden.audit_signing import CheckpointVerifier

    return CheckpointVerifier([signer.public_key])


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    parser.add_argument("--postgres-url")
    parser.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    args = parser.parse_args()
    rows: list[list[object]] = []
    cases = [
        ("no checkpoints, 1 writer", None, 1),
        ("checkpoint every 256, 1 writer", 256, 1),
        ("checkpoint every 256, 8 writers", 256, 8),
    ]
    backends: list[tuple[str, str | None]] = []
    tmp = Path(tempfile.mkdtemp(prefix="audit-bench-"))
    backends.append(("sqlite", None))
    if args.postgres_url:
        backends.append(("postgresql", args.postgres_url))
    print(f"{args.events} events per case")
    print(f"{'backend':<11} {'case':<34} {'appends/s':>10} {'p50 ms':>8} {'p99 ms':>8} {'verify ev/s':>12}")
    for name, pg_url in backends:
        for label, every, writers in cases:
            if pg_url is None:
                url, schema = f"sqlite+aiosqlite:///{tmp / uuid.uuid4().hex}.db", None
                admin = None
            else:
                url, schema = pg_url, f"mw7bench_{uuid.uuid4().hex[:12]}"
                admin = create_async_engine(pg_url)
                async with admin.begin() as conn:
                    await conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
            try:
                r = await run(url, schema, args.events, every, writers)
            finally:
                if admin is not None:
                    async with admin.begin() as conn:
                        await conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
                    await admin.dispose()
            print(
                f"{name:<11} {label:<34} {r['appends_per_s']:>10.0f} {r['p50_ms']:>8.2f} {r['p99_ms']:>8.2f} "
                f"{r['verify_events_per_s']:>12.0f}"
            )
            rows.append(
                [
                    name,
                    label,
                    f"{r['appends_per_s']:.0f}",
                    f"{r['p50_ms']:.2f}",
                    f"{r['p99_ms']:.2f}",
                    f"{r['verify_events_per_s']:.0f}",
                ]
            )
    if args.publish:
        headers = ["backend", "case", "appends/s", "p50 ms", "p99 ms", "verification events/s"]
        report.publish("audit_bench", f"{report.table(headers, rows)}\n\n{args.events} events per case.")


if __name__ == "__main__":
    asyncio.run(main())
