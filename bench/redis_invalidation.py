"""What one cache invalidation costs as the Redis keyspace grows.

    nice -n 10 .venv/bin/python -m bench.redis_invalidation --redis redis://127.0.0.1:6379/15 [--publish]

Every committed memory drops its owner's cached searches with `RedisCache.delete_prefix`, which
walks `SCAN MATCH <prefix>*`: SCAN visits the *whole* keyspace of the database whatever the pattern,
so the cost of one invalidation grows with every other key in that Redis database. This measures
it with 0, 10k and 100k unrelated keys (under a namespace of its own, removed afterwards), side by
side in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid

import redis.asyncio as aioredis

from bench import report
from memwarden.stores.cache import RedisCache, owner_prefix

ROUNDS = 20


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--redis", required=True)
    parser.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    args = parser.parse_args()
    rows: list[list[object]] = []
    namespace = f"mwbench{uuid.uuid4().hex[:10]}"
    raw = aioredis.Redis.from_url(args.redis)
    cache = RedisCache(args.redis, namespace)
    baseline = await raw.dbsize()
    filled = 0
    print(f"other keys already in this database: {baseline}")
    print("| keys under the namespace | delete_prefix p50 ms | p95 ms |")
    print("|---|---|---|")
    try:
        for target in (0, 10_000, 100_000):
            async with raw.pipeline(transaction=False) as pipe:
                for i in range(filled, target):
                    pipe.set(f"{namespace}:{owner_prefix('tenant', f'owner-{i}')}x", b"v", ex=3600)
                await pipe.execute()
            filled = target
            ms: list[float] = []
            for r in range(ROUNDS):
                began = time.perf_counter()
                await cache.delete_prefix(owner_prefix("tenant", f"nobody-{r}"))
                ms.append((time.perf_counter() - began) * 1000)
            ms.sort()
            print(f"| {target:,} | {statistics.median(ms):.1f} | {ms[int(0.95 * (len(ms) - 1))]:.1f} |", flush=True)
            rows.append([f"{target:,}", f"{statistics.median(ms):.1f}", f"{ms[int(0.95 * (len(ms) - 1))]:.1f}"])
        if args.publish:
            table = report.table(["keys under the namespace", "delete_prefix p50 ms", "p95 ms"], rows)
            report.publish("redis_invalidation", f"{table}\n\n{ROUNDS} invalidations per size; {baseline} other keys.")
    finally:
        keys = [k async for k in raw.scan_iter(match=f"{namespace}:*", count=1000)]
        for start in range(0, len(keys), 1000):
            await raw.unlink(*keys[start : start + 1000])
        await cache.close()
        await raw.aclose()


if __name__ == "__main__":
    asyncio.run(main())
