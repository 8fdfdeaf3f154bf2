"""The embedded stack in this process, for benchmarks: Temporal dev server, worker, API under uvicorn.

The same pieces `memwarden up` wires together (the API and the worker share one Temporal client, so
workflows start eagerly on the local worker), on free ports, data in a directory of the caller's.
A bench may register extra workflows and activities (the Temporal floor) on the same worker.
"""

from __future__ import annotations

import asyncio
import compileall
import contextlib
import dataclasses
import math
import os
import statistics
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from temporalio.client import Client
from temporalio.worker import Worker

from api.app import create_app
from bench.floor import FloorWorkflow, noop
from memwarden.config import Settings
from memwarden.identity import mint_token
from memwarden.services.deps import Deps
from memwarden.temporal.client import connect
from memwarden.temporal.sandbox import SANDBOX
from stack.devserver import DevServer, free_port
from stack.embedded import run_api
from worker.runtime import build_worker, open_deps

FLOOR_SANDBOX = dataclasses.replace(SANDBOX, restrictions=SANDBOX.restrictions.with_passthrough_modules("bench.floor"))
"""The production sandbox plus the floor's module passed through, so the floor is Temporal's cost alone."""


def compile_project() -> None:
    """Byte-compile the project's modules, as `make install` and a wheel install do, so that a bench
    measures an installed service even where Python writes no bytecode (PYTHONDONTWRITEBYTECODE)."""
    root = Path(__file__).resolve().parents[1]
    for package in ("memwarden", "workflows", "activities", "api", "worker", "stack"):
        compileall.compile_dir(root / package, quiet=1)


def floor_queue(settings: Settings) -> str:
    return f"{settings.temporal_task_queue}-floor"


@dataclass
class Stack:
    settings: Settings
    client: Client
    deps: Deps
    http: httpx.AsyncClient
    dev_pid: int | None = None
    """The Temporal dev server's process (its resident memory is read from /proc)."""

    def token(self, *, tenant: str, sub: str, role: str, **claims: Any) -> str:
        return mint_token(
            self.settings.auth_secret_value, tenant=tenant, sub=sub, role=role, ttl_seconds=86400, **claims
        )

    async def floor(self) -> float:
        """One Temporal floor round trip (seconds), eagerly started like the search route's workflow."""
        start = time.perf_counter()
        await self.client.execute_workflow(
            FloorWorkflow.run,
            "x",
            id=f"floor-{uuid.uuid4()}",
            task_queue=floor_queue(self.settings),
            request_eager_start=True,
        )
        return time.perf_counter() - start


@contextlib.asynccontextmanager
async def running_stack(data_dir: Path, *, database_url: str | None = None) -> AsyncIterator[Stack]:
    """Start everything; stop it all on exit. The store is SQLite in `data_dir` unless `database_url`
    names another (an empty PostgreSQL database: the store migrates it); the index is Qdrant Edge."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    await asyncio.to_thread(compile_project)
    await asyncio.to_thread(data_dir.mkdir, parents=True, exist_ok=True)
    dev = DevServer(data_dir / "temporal", port=free_port(), headless=True)
    await dev.start()
    try:
        settings = Settings(
            profile="embedded",  # type: ignore[arg-type]
            data_dir=data_dir,
            database_url=database_url,
            temporal_address=dev.address,
            temporal_task_queue=f"bench-{uuid.uuid4().hex[:8]}",
            api_port=free_port(),
        )
        client = await connect(settings)
        async with open_deps(settings) as deps:
            worker = build_worker(client, deps)  # exactly the production worker
            # The floor on a worker of its own (same client, same process, so eager start applies too),
            # in the production sandbox with its module passed through: the floor stays what Temporal
            # costs, and the real workflows' per-run re-import of their modules counts as memwarden's.
            floor_worker = Worker(
                client,
                task_queue=floor_queue(settings),
                workflows=[FloorWorkflow],
                activities=[noop],
                workflow_runner=FLOOR_SANDBOX,
                max_concurrent_local_activities=32,
            )
            app = create_app(settings, temporal=client, store=deps.store)
            async with worker, floor_worker:
                servers: list[uvicorn.Server] = []
                serving = asyncio.create_task(run_api(settings, servers, app))
                deadline = time.monotonic() + 60
                while not (servers and servers[0].started):
                    if serving.done() or time.monotonic() > deadline:
                        raise RuntimeError("the API did not start")
                    await asyncio.sleep(0.05)
                base = f"http://127.0.0.1:{settings.api_port}"
                async with httpx.AsyncClient(base_url=base, timeout=120) as http:
                    try:
                        yield Stack(settings=settings, client=client, deps=deps, http=http, dev_pid=dev.pid)
                    finally:
                        servers[0].should_exit = True
                        await asyncio.wait_for(serving, 30)
    finally:
        await dev.stop()


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty sample: the ceil(q/100 * n)-th smallest.
    (Not round(x + 0.5): Python rounds halves to even, which took the 96th of 100 values for p95.)"""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(q * len(ordered) / 100)))
    return ordered[rank - 1]


def python_speed_ms(n: int = 2_000_000, rounds: int = 5) -> float:
    """The best of `rounds` timings of a fixed pure-Python loop, in ms: how fast this machine runs Python
    right now. Machines of one kind differ (up to twice the CPU for the same Temporal floor), so absolute
    rates are compared across runs only beside this figure."""
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        total = 0
        for i in range(n):
            total += i
        best = min(best, time.perf_counter() - start)
    return round(best * 1000, 1)


def summary_ms(values: Sequence[float]) -> dict[str, float]:
    """p50 / p95 / mean in milliseconds."""
    return {
        "p50": round(percentile(values, 50) * 1000, 2),
        "p95": round(percentile(values, 95) * 1000, 2),
        "mean": round(statistics.fmean(values) * 1000, 2),
    }


def cpu_by_part(pid: int | None = None) -> Counter[str]:
    """CPU seconds (user + system) of a process (this one by default) by thread group, and of its live
    children (the Temporal dev server, the writers' process): which part an operation's CPU goes to, so
    a run says whether Temporal, the event loop or the embedding is the one to cut.

    Groups: "event loop" (the main thread: API, workflow payloads, activities), "python threads"
    (threads Python started: the embedding, SQLite's thread hops, the sandbox's activations),
    "native threads" (the SDK's Rust core, Qdrant Edge), "dev server", "writers" (any other child)."""
    me = os.getpid() if pid is None else pid
    ticks = os.sysconf("SC_CLK_TCK")
    parts: Counter[str] = Counter()

    def parsed(stat: Path) -> tuple[str, list[str]] | None:
        try:
            text = stat.read_text()
        except OSError:
            return None  # gone meanwhile
        return text[text.index("(") + 1 : text.rindex(")")], text.rsplit(")", 1)[1].split()

    own = parsed(Path(f"/proc/{me}/stat"))
    own_name = own[0] if own is not None else ""
    try:
        tasks = list(Path(f"/proc/{me}/task").iterdir())
    except OSError:
        tasks = []  # the process is gone
    for task in tasks:
        found = parsed(task / "stat")
        if found is None:
            continue
        name, fields = found
        if int(task.name) == me:
            part = "event loop"
        else:
            part = "python threads" if name == own_name else "native threads"
        parts[part] += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
    for stat in Path("/proc").glob("[0-9]*/stat"):
        found = parsed(stat)
        if found is not None and int(found[1][1]) == me:  # ppid
            name, fields = found
            part = "dev server" if name == "temporal" else "writers"
            # A child's own threads are in its utime/stime; its finished children are not counted.
            parts[part] += (int(fields[11]) + int(fields[12])) / ticks
    return parts


def per_op_ms(before: Counter[str], after: Counter[str], ops: int) -> dict[str, float]:
    """CPU milliseconds per operation by part (unrounded), between two `cpu_by_part` readings."""
    used = {part: after[part] - before[part] for part in sorted(after)}
    return {part: 1000 * seconds / ops for part, seconds in used.items() if seconds > 0}


async def cpu_ms_per_call(run: Callable[[int], Awaitable[object]], rounds: int) -> dict[str, float]:
    """CPU ms per call of `run(i)` by part, over `rounds` calls back to back between two readings."""
    before = cpu_by_part()
    for i in range(rounds):
        await run(i)
    return per_op_ms(before, cpu_by_part(), rounds)


def rounded(ms: dict[str, float]) -> dict[str, float]:
    """The per-part figures as reported; totals are summed from the unrounded parts, so they add up."""
    return {part: round(value, 1) for part, value in ms.items()}
