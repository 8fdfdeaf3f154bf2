"""Remember and search throughput of the production processes on this machine.

    nice -n 10 .venv/bin/python -m bench.production_profile \
        --postgres postgresql+asyncpg://postgres@127.0.0.1:5432/test --redis redis://127.0.0.1:6379/15 [--publish]

One `memwarden worker` and one `memwarden api`, separate processes as in production (so no eager
workflow start), on PostgreSQL (a fresh database, dropped afterwards) and Redis (a namespace of its
own, removed afterwards), with a Temporal dev server for the cluster. The index is Qdrant Edge in the
worker (`MEMWARDEN_VECTOR_BACKEND=edge`): qdrant-client's local mode filters in Python and must never
be benchmarked, and no Qdrant server runs here, so the figures exclude a network hop to Qdrant.
Clients are bounded (a fixed number of requests each) and talk to 127.0.0.1 only. 1 and 8 clients
run in the same invocation so their ratio is read side by side.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import redis.asyncio as aioredis
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

ROOT = Path(__file__).resolve().parents[1]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
sys.path.insert(0, str(ROOT))

from bench import report  # noqa: E402
from stack.devserver import DevServer, free_port  # noqa: E402
from tests.e2e.harness import Child, mint, production_secrets  # noqa: E402

HOBBIES = ["sailing", "pottery", "chess", "birdwatching", "baking", "climbing", "jazz piano", "gardening"]
FOODS = ["ramen", "lentil soup", "sushi", "tacos", "paella", "dumplings", "falafel", "risotto"]
PLACES = ["Lisbon", "Kyoto", "Oslo", "Nairobi", "Lima", "Hanoi", "Dublin", "Tbilisi"]
TEMPLATES = [
    "{who} spends weekends on {hobby} and cooks {food} afterwards",
    "{who} is planning a trip to {place} to try the local {food}",
    "{who} took up {hobby} after moving to {place}",
]


def fact(client: int, i: int) -> str:
    """A distinct memory per (client, i): near-identical texts would be NOOP duplicates, not writes."""
    template = TEMPLATES[i % len(TEMPLATES)]
    return template.format(
        who=f"Member {client}",
        hobby=HOBBIES[(i // 3) % len(HOBBIES)],
        food=FOODS[(i // 24) % len(FOODS)],
        place=PLACES[(i + client) % len(PLACES)],
    )


async def run_clients(
    url: str, tokens: list[str], per_client: int, kind: str, decisions: Counter[str], offset: int = 0
) -> tuple[float, list[float]]:
    """`len(tokens)` concurrent clients, `per_client` requests each; returns (seconds, per-request ms)."""
    latencies: list[float] = []

    async def client(idx: int, token: str) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
            for i in range(per_client):
                if kind == "remember":
                    body = {
                        "content": fact(idx, offset + i),
                        "type": "fact",
                        "source_kind": "user",
                        "reason": "user_stated_fact",
                    }
                    path = "/v1/memories"
                else:
                    body = {"query": f"what hobby does member {idx} have in {PLACES[i % len(PLACES)]}?", "k": 5}
                    path = "/v1/search"
                began = time.perf_counter()
                answer = await http.post(path, json=body)
                latencies.append((time.perf_counter() - began) * 1000)
                if answer.status_code != 200:
                    raise RuntimeError(f"{path}: {answer.status_code} {answer.text[:200]}")
                if kind == "remember":
                    decisions[answer.json()["decision"]] += 1

    began = time.perf_counter()
    await asyncio.gather(*(client(i, t) for i, t in enumerate(tokens)))
    return time.perf_counter() - began, latencies


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of one process so far (from /proc), independent of other load."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def production_env(
    database_url: str, *, data_dir: Path, redis_url: str, redis_namespace: str, temporal_address: str
) -> dict[str, str]:
    """The environment both processes get: every setting the production profile requires, fresh secrets."""
    return {
        "MEMWARDEN_PROFILE": "production",
        "MEMWARDEN_DATABASE_URL": database_url,
        "MEMWARDEN_VECTOR_BACKEND": "edge",
        "MEMWARDEN_DATA_DIR": str(data_dir),
        "MEMWARDEN_REDIS_URL": redis_url,
        "MEMWARDEN_REDIS_NAMESPACE": redis_namespace,
        "MEMWARDEN_TEMPORAL_ADDRESS": temporal_address,
        **production_secrets(),
    }


def row(kind: str, clients: int, seconds: float, ms: list[float], cpu_ms: dict[str, float]) -> str:
    ms = sorted(ms)
    p95 = ms[int(0.95 * (len(ms) - 1))]
    cpu = " | ".join(f"{v:.1f}" for v in cpu_ms.values())
    rate = len(ms) / seconds
    return f"| {kind} | {clients} | {len(ms)} | {rate:.1f} | {statistics.median(ms):.0f} | {p95:.0f} | {cpu} |"


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--postgres", required=True)
    parser.add_argument("--redis", required=True)
    parser.add_argument("--per-client", type=int, default=25)
    parser.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="mw-bench-prod-"))
    dbname = f"mw_bench_{uuid.uuid4().hex[:10]}"
    namespace = f"mwbench{uuid.uuid4().hex[:10]}"
    admin = create_async_engine(args.postgres, isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(sa.text(f'CREATE DATABASE "{dbname}"'))
    dev = DevServer(work / "temporal", port=free_port(), headless=True)
    await dev.start()
    api_port, health_port = free_port(), free_port()
    env = production_env(
        make_url(args.postgres).set(database=dbname).render_as_string(hide_password=False),
        data_dir=work / "data",
        redis_url=args.redis,
        redis_namespace=namespace,
        temporal_address=dev.address,
    )
    worker = Child("worker", ["worker"], env | {"MEMWARDEN_WORKER_HEALTH_PORT": str(health_port)}, work)
    api = Child("api", ["api", "--host", "127.0.0.1", "--port", str(api_port)], env, work)
    try:
        worker.start()
        await asyncio.to_thread(worker.wait_ready, f"http://127.0.0.1:{health_port}/readyz")
        api.start()
        url = f"http://127.0.0.1:{api_port}"
        await asyncio.to_thread(api.wait_ready, f"{url}/readyz")
        tokens = [
            await asyncio.to_thread(
                mint, None, "--tenant", "bench", "--sub", f"user-{i}", "--role", "user", cwd=work, env=env
            )
            for i in range(8)
        ]
        decisions: Counter[str] = Counter()
        await run_clients(url, tokens[:1], 5, "remember", Counter(), offset=10_000)  # warm-up
        assert worker.proc is not None and api.proc is not None and dev.pid is not None
        pids = {"worker": worker.proc.pid, "api": api.proc.pid, "temporal": dev.pid}
        load_before = os.getloadavg()[0]
        print(f"load average before: {load_before:.2f}")
        lines = [
            "| operation | clients | requests | requests/s | p50 ms | p95 ms "
            "| worker CPU ms/req | API CPU ms/req | Temporal dev server CPU ms/req |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        print("\n".join(lines))
        for kind in ("remember", "search"):
            for n in (1, 8):
                before = {k: cpu_seconds(p) for k, p in pids.items()}
                offset = 0 if n == 1 else args.per_client  # the 8-client round never repeats client 0's facts
                seconds, ms = await run_clients(url, tokens[:n], args.per_client, kind, decisions, offset)
                cpu = {k: (cpu_seconds(p) - before[k]) * 1000 / len(ms) for k, p in pids.items()}
                lines.append(row(kind, n, seconds, ms, cpu))
                print(lines[-1], flush=True)
        load_after = os.getloadavg()[0]
        print(f"load average after: {load_after:.2f}; Remember decisions: {dict(decisions)}")
        if args.publish:
            made = ", ".join(f"{count} {decision}" for decision, count in sorted(decisions.items()))
            notes = f"Remember decisions: {made}; load average {load_before:.1f} before, {load_after:.1f} after."
            report.publish("production_profile", "\n".join(lines) + "\n\n" + notes)
    finally:
        api.kill()
        worker.kill()
        await dev.stop()
        async with admin.connect() as conn:
            await conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)'))
        await admin.dispose()
        client = aioredis.Redis.from_url(args.redis)
        keys = [k async for k in client.scan_iter(match=f"{namespace}:*")]
        if keys:
            await client.unlink(*keys)
        await client.aclose()


if __name__ == "__main__":
    asyncio.run(main())
