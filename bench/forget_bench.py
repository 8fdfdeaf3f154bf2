"""Forget's speed on the embedded profile: one memory forgotten and verified (p50), and a 10k-memory subject.

    nice -n 10 .venv/bin/python -m bench.forget_bench [--single 30] [--subject 10000] [--publish]

Everything real and in this process, as `memwarden up` runs it: the Temporal dev server (child process),
the production worker over SQLite (WAL, secure_delete) + Qdrant Edge + the in-process cache, one SQLite
replica. Each deletion is measured from the tombstone (what the API does before its 202) to the
workflow's result (every sink verified, the receipt chained). Seeding bypasses the embedder (random unit
vectors) and writes rows in bulk: the benchmark measures forgetting, not remembering. The per-sink
times are the receipt's own: first purge start to verification.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa

from bench import report
from memwarden.forget import MemorySelector, OwnerSelector, redacted, selector_key, subject_key
from memwarden.records import ForgetInput, MemoryRecord, MemoryType, Scope, SourceKind, Status, content_hash
from memwarden.stores.forget import ForgetStore
from memwarden.stores.sql import _record_to_row
from memwarden.stores.sql_models import memories
from memwarden.stores.vectors import index_point
from memwarden.temporal.client import connect
from stack.devserver import DevServer, free_port
from tests.workflows.record_histories import settings_for
from worker.runtime import build_worker, open_deps
from workflows.forget import ForgetWorkflow

DIM = 384
args_debug = False
BATCH = 500


def vector(rng: random.Random) -> list[float]:
    v = [rng.gauss(0, 1) for _ in range(DIM)]
    norm = sum(x * x for x in v) ** 0.5
    return [x / norm for x in v]


def make(tenant: str, owner: str, i: int) -> MemoryRecord:
    now = datetime.now(UTC)
    text = f"synthetic bench memory {i} about {owner}: likes item {i % 97}"
    return MemoryRecord(
        id=str(uuid.uuid4()),
        tenant_id=tenant,
        owner_id=owner,
        scope=Scope.USER,
        type=MemoryType.EPISODIC if i % 10 else MemoryType.FACT,
        content=text,
        content_hash=content_hash(text),
        source_kind=SourceKind.USER,
        reason="user_stated_fact",
        status=Status.ACTIVE,
        created_at=now,
        updated_at=now,
    )


async def seed(deps, tenant: str, owner: str, n: int, rng: random.Random) -> list[str]:  # type: ignore[no-untyped-def]
    ids: list[str] = []
    for start in range(0, n, BATCH):
        batch = [make(tenant, owner, i) for i in range(start, min(n, start + BATCH))]
        async with deps.store.transaction() as conn:
            await conn.execute(sa.insert(memories), [_record_to_row(r) for r in batch])
        await deps.index.upsert([index_point(r, vector(rng)) for r in batch])
        for replica in deps.replicas:
            for r in batch:
                await replica.copy(r)
        ids += [r.id for r in batch]
    return ids


TOMBSTONE_TIMES: list[float] = []


async def forget(deps, client, task_queue: str, tenant: str, selector) -> tuple[float, str]:  # type: ignore[no-untyped-def]
    body = redacted(selector, subject_key("bench"), tenant)
    began = time.perf_counter()
    row, _ = await ForgetStore(deps.store).begin(
        tenant_id=tenant,
        requester="privacy:bench",
        selector=selector,
        redacted_selector=body,
        selector_key=selector_key(tenant, body),
        reason="bench",
        subject_hash=body.get("subject_hash"),
        now=datetime.now(UTC),
    )
    TOMBSTONE_TIMES.append(time.perf_counter() - began)
    await client.execute_workflow(
        ForgetWorkflow.run, ForgetInput(deletion_id=row.id, tenant_id=tenant), id=row.workflow_id, task_queue=task_queue
    )
    return time.perf_counter() - began, row.id


async def main(single: int, subject: int) -> list[list[str]]:
    """Runs every measurement, printing as it goes; returns (what, figure) rows for docs/benchmarks.md."""
    logging.basicConfig(level=logging.WARNING)
    rng = random.Random(7)
    rows: list[list[str]] = []
    with tempfile.TemporaryDirectory(prefix="memwarden-forget-bench-") as tmp:
        root = Path(tmp)
        async with DevServer(root / "temporal", port=free_port(), headless=True) as dev:
            settings = settings_for(
                root / "data", dev.address, "forget-bench", replica_urls=[f"sqlite+aiosqlite:///{root / 'replica.db'}"]
            )
            client = await connect(settings)
            async with open_deps(settings) as deps, build_worker(client, deps):
                tenant = "bench"
                background = await seed(deps, tenant, "someone-else", 2000, rng)
                ones = await seed(deps, tenant, "single-owner", single + 3, rng)
                for mid in ones[:3]:  # warm-up, not measured
                    await forget(deps, client, "forget-bench", tenant, MemorySelector(memory_id=mid))
                times = []
                last = ""
                for mid in ones[3:]:
                    took, last = await forget(deps, client, "forget-bench", tenant, MemorySelector(memory_id=mid))
                    times.append(took)
                times.sort()
                tomb = sorted(TOMBSTONE_TIMES[3:])
                print(f"tombstone of one memory (before the 202): p50={statistics.median(tomb) * 1000:.1f} ms")
                rows.append(
                    ["tombstone of one memory (before the 202), p50", f"{statistics.median(tomb) * 1000:.1f} ms"]
                )
                print(
                    f"one memory forgotten and verified: n={len(times)} p50={statistics.median(times) * 1000:.0f} ms "
                    f"p90={times[int(len(times) * 0.9) - 1] * 1000:.0f} ms (index holds {len(background) + len(ones)})"
                )
                rows.append(
                    [
                        f"one memory forgotten and verified, index of {len(background) + len(ones):,} points "
                        f"(n={len(times)})",
                        f"p50 {statistics.median(times):.2f} s, p90 {times[int(len(times) * 0.9) - 1]:.2f} s",
                    ]
                )

                if args_debug:
                    hist = await client.get_workflow_handle(f"forget-{last}").fetch_history()
                    t0 = hist.events[0].event_time.ToDatetime()
                    for ev in hist.events:
                        print(
                            f"    {(ev.event_time.ToDatetime() - t0).total_seconds() * 1000:7.1f} ms  {ev.event_type}"
                        )
                for s in await ForgetStore(deps.store).sinks(last):
                    assert s.started_at is not None and s.verified_at is not None
                    print(
                        f"  {s.name:<20} {(s.verified_at - s.started_at).total_seconds() * 1000:6.0f} ms  "
                        f"attempts={s.attempts}"
                    )
                # Side by side, same run: the same deletions without the Edge vacuum. NOT a valid erasure
                # (deleted vectors stay in the segment files); printed only to show what the vacuum costs.
                real_vacuum = deps.index.vacuum

                async def no_vacuum() -> None:
                    return None

                deps.index.vacuum = no_vacuum
                spare = await seed(deps, tenant, "comparison-owner", single, rng)
                plain = []
                for mid in spare:
                    took, _ = await forget(deps, client, "forget-bench", tenant, MemorySelector(memory_id=mid))
                    plain.append(took)
                deps.index.vacuum = real_vacuum
                await real_vacuum()
                print(
                    "  for comparison, without the Edge vacuum (not a valid erasure): "
                    f"p50={statistics.median(plain) * 1000:.0f} ms"
                )
                rows.append(
                    [
                        "the same without the Edge vacuum (not a valid erasure: shows the vacuum's cost)",
                        f"p50 {statistics.median(plain):.2f} s",
                    ]
                )
                seeded = time.perf_counter()
                ids = await seed(deps, tenant, "big-subject", subject, rng)
                print(f"seeded {len(ids)} memories for one subject in {time.perf_counter() - seeded:.1f} s")
                took, deletion_id = await forget(
                    deps, client, "forget-bench", tenant, OwnerSelector(owner_id="big-subject")
                )
                print(
                    f"subject with {subject} memories erased and verified: {took:.1f} s "
                    f"(of which the tombstone, the API's part before its 202: {TOMBSTONE_TIMES[-1]:.2f} s)"
                )
                rows.append([f"a subject with {subject:,} memories erased and verified", f"{took:.1f} s"])
                rows.append(["of which the tombstone (before the 202)", f"{TOMBSTONE_TIMES[-1]:.2f} s"])
                for s in await ForgetStore(deps.store).sinks(deletion_id):
                    assert s.started_at is not None and s.verified_at is not None
                    print(
                        f"  {s.name:<20} {(s.verified_at - s.started_at).total_seconds():6.2f} s  "
                        f"purged={s.purged} attempts={s.attempts} method={s.method}"
                    )
                    rows.append(
                        [
                            f"sink `{s.name}`, {subject:,}-memory subject (first purge to verification)",
                            f"{(s.verified_at - s.started_at).total_seconds():.2f} s",
                        ]
                    )
                assert await deps.index.present(ids[:BATCH]) == []
    return rows


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--single", type=int, default=30)
    parser.add_argument("--subject", type=int, default=10_000)
    parser.add_argument("--debug", action="store_true", help="print the last single deletion's history timings")
    parser.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    args = parser.parse_args()
    args_debug = args.debug
    measured = asyncio.run(main(args.single, args.subject))
    if args.publish:
        report.publish("forget_bench", report.table(["what", "figure"], measured))
