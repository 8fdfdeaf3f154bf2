"""Remember through the public API beside the Temporal floor, measured side by side in one run.

    .venv/bin/python -m bench.remember_bench [--n 200] [--clients 8] [--per-client 40] [--json] [--publish]

What it measures, on the embedded stack (`memwarden up`'s parts in this process: the dev server as a
child, the worker over SQLite + Qdrant Edge, the API under uvicorn):
- decision latency: one `POST /v1/memories` after another over real HTTP (full gate: detectors, embedding,
  nearest-neighbour lookup, commit to store + index, audit), p50/p95;
- the floor: an eagerly started workflow running one no-op local activity (bench/floor.py), on the same
  dev server, in the same process and through the same client (codec, tracing interceptor, data
  converter), on a worker built as the real one is (the same sandboxed runner, the same local-activity
  limit), p50/p95. The two are interleaved (one floor run, one write, ...) so that a noisy
  neighbour on this shared machine slows both alike; the ratio is the figure to read;
- the HTTP round trip alone (`GET /v1/settings`: auth and one read), interleaved too, to show how much of
  the gap to the floor is the web stack rather than the gate;
- writes/s with `--clients` concurrent HTTP clients, each writing `--per-client` memories for its own person,
  beside the floor's own rate with the same concurrency, and the CPU each costs (this process, the dev
  server and the writers' process), the figure that other work on the machine hardly moves. The writers
  run in a process of their own (bench/load_clients.py), as agent backends do: inside this one they take
  the GIL from the server they measure (`--in-process-clients` runs them here, to see that effect).
Every text is synthetic.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from temporalio.worker import Worker  # noqa: E402

from bench import report as published  # noqa: E402
from bench.floor import FloorWorkflow, noop  # noqa: E402
from bench.load_clients import body, run_elsewhere  # noqa: E402
from bench.stack import FLOOR_SANDBOX, cpu_by_part, per_op_ms, python_speed_ms, rounded  # noqa: E402
from memwarden.temporal.client import connect  # noqa: E402
from tests.integration.api_stack import Api, embedded_api  # noqa: E402
from worker import event_loop  # noqa: E402
from worker.runtime import MAX_CONCURRENT_LOCAL_ACTIVITIES  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(values), 2), "p95_ms": round(pct(values, 0.95), 2), "n": len(values)}


async def main(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="memwarden-bench-") as tmp:
        async with embedded_api(Path(tmp)) as api:
            client = await connect(api.settings)
            floor_queue = f"floor-{uuid.uuid4().hex[:6]}"
            async with (
                # Sandboxed like RememberWorkflow (an unsandboxed floor is cheaper than any real workflow can be),
                # its module passed through (the sandbox's per-run re-import of RememberWorkflow's modules
                # counts as memwarden's cost, not the floor's), same client, so the same codec, data
                # converter and interceptors.
                Worker(
                    client,
                    task_queue=floor_queue,
                    workflows=[FloorWorkflow],
                    activities=[noop],
                    workflow_runner=FLOOR_SANDBOX,
                    max_concurrent_local_activities=MAX_CONCURRENT_LOCAL_ACTIVITIES,
                ),
                httpx.AsyncClient(base_url=api.base_url, timeout=60) as http,
            ):

                async def floor() -> float:
                    start = time.perf_counter()
                    await client.execute_workflow(
                        FloorWorkflow.run,
                        "floor",
                        id=f"floor-{uuid.uuid4()}",
                        task_queue=floor_queue,
                        request_eager_start=True,
                    )
                    return (time.perf_counter() - start) * 1000

                async def write(headers: dict[str, str], who: str, decisions: Counter[str]) -> float:
                    sent = body(rng, who)
                    start = time.perf_counter()
                    answer = await http.post("/v1/memories", headers=headers, json=sent)
                    elapsed = (time.perf_counter() - start) * 1000
                    answer.raise_for_status()
                    decisions[answer.json()["decision"]] += 1
                    return elapsed

                async def http_floor(headers: dict[str, str]) -> float:
                    start = time.perf_counter()
                    (await http.get("/v1/settings", headers=headers)).raise_for_status()
                    return (time.perf_counter() - start) * 1000

                return await measure(api, args, floor, write, http_floor)


async def measure(api: Api, args: argparse.Namespace, floor: Any, write: Any, http_floor: Any) -> dict[str, Any]:
    solo = api.auth("bench", "solo")
    decisions: Counter[str] = Counter()
    for _ in range(args.warmup):  # JIT of the sandbox, detector and model warm-up, connection pools
        await floor()
        await write(solo, "solo", decisions)
    decisions.clear()
    floors: list[float] = []
    writes: list[float] = []
    https: list[float] = []
    for _ in range(args.n):
        floors.append(await floor())
        writes.append(await write(solo, "solo", decisions))
        https.append(await http_floor(solo))

    async def run_clients(one: Any) -> tuple[float, Counter[str], Counter[str]]:
        """Wall seconds, and CPU of this process and its children (the dev server) before and after."""
        start, cpu = time.perf_counter(), cpu_by_part()
        await asyncio.gather(*(one(i) for i in range(args.clients)))
        return time.perf_counter() - start, cpu, cpu_by_part()

    async def api_client(i: int) -> None:
        headers = api.auth("bench", f"person-{i}")
        for _ in range(args.per_client):
            await write(headers, f"person-{i}", decisions)

    async def floor_client(i: int) -> None:
        for _ in range(args.per_client):
            await floor()

    async def clients_elsewhere() -> tuple[float, Counter[str], Counter[str]]:
        """The writers in a process of their own (bench/load_clients.py), as agent backends are: wall
        seconds as that process measured them, and CPU of this process and its children meanwhile (the
        dev server and the writers' process included)."""
        job = {
            "base_url": api.base_url,
            "clients": [
                {"headers": api.auth("bench", f"person-{i}"), "who": f"person-{i}"} for i in range(args.clients)
            ],
            "per_client": args.per_client,
            "seed": 11,
        }
        report, cpu, after = await run_elsewhere(job, cpu_by_part)
        if report["failed"]:
            raise RuntimeError(f"{report['failed']} writes failed")
        decisions.update(report["decisions"])
        return report["elapsed_s"], cpu, after

    total = args.clients * args.per_client
    floor_elapsed, floor_before, floor_after = await run_clients(floor_client)
    if args.in_process_clients:
        api_elapsed, api_before, api_after = await run_clients(api_client)
    else:
        api_elapsed, api_before, api_after = await clients_elsewhere()
    api_parts = per_op_ms(api_before, api_after, total)
    floor_parts = per_op_ms(floor_before, floor_after, total)
    result = {
        "decision_latency": summary(writes),
        "floor_latency": summary(floors),
        "http_floor_latency": summary(https),
        "p50_ratio": round(statistics.median(writes) / statistics.median(floors), 2),
        "concurrent": {
            "clients": args.clients,
            "clients_in": "this process" if args.in_process_clients else "a process of their own",
            "writes": total,
            "writes_per_s": round(total / api_elapsed, 1),
            "floor_workflows_per_s": round(total / floor_elapsed, 1),
            # CPU per operation (this process with every thread, plus the dev server): unlike rates, it
            # hardly moves when other work shares the machine, so it says what 2 idle cores could do.
            "cpu_ms_per_write": round(sum(api_parts.values()), 1),
            "cpu_ms_per_floor_workflow": round(sum(floor_parts.values()), 1),
            "cpu_ms_per_write_by_part": rounded(api_parts),
            "cpu_ms_per_floor_workflow_by_part": rounded(floor_parts),
            "load_average_1min": round(os.getloadavg()[0], 1),
        },
        "python_loop_ms": python_speed_ms(),
        "decisions": dict(decisions),
    }
    return result


def report(r: dict[str, Any]) -> str:
    d, f, h, c = r["decision_latency"], r["floor_latency"], r["http_floor_latency"], r["concurrent"]
    return "\n".join(
        [
            "| measure | p50 ms | p95 ms |",
            "|---|---|---|",
            f"| decision latency, POST /v1/memories (n={d['n']}) | {d['p50_ms']} | {d['p95_ms']} |",
            f"| Temporal floor, eager workflow + 1 local activity (n={f['n']}) | {f['p50_ms']} | {f['p95_ms']} |",
            f"| HTTP round trip alone, GET /v1/settings (n={h['n']}) | {h['p50_ms']} | {h['p95_ms']} |",
            f"| ratio (p50), decision / Temporal floor | {r['p50_ratio']}x | |",
            "",
            f"{c['clients']} concurrent clients ({c['clients_in']}), {c['writes']} writes: "
            f"{c['writes_per_s']} writes/s through the API "
            f"(floor workflows alone: {c['floor_workflows_per_s']}/s). CPU per write {c['cpu_ms_per_write']} ms, "
            f"per floor workflow {c['cpu_ms_per_floor_workflow']} ms (process and children: dev server, writers); "
            f"load average {c['load_average_1min']}; the machine's pure-Python loop {r['python_loop_ms']} ms. "
            f"Decisions: {r['decisions']}",
            "",
            f"CPU ms per write by part: {c['cpu_ms_per_write_by_part']}; "
            f"per floor workflow: {c['cpu_ms_per_floor_workflow_by_part']}",
        ]
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--per-client", type=int, default=40)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    parser.add_argument(
        "--in-process-clients",
        action="store_true",
        help="run the concurrent writers in this process (they then share the server's GIL)",
    )
    arguments = parser.parse_args()
    measured = event_loop.run(main(arguments))
    print(json.dumps(measured, indent=2) if arguments.json else report(measured))
    if arguments.publish:
        published.publish("remember", report(measured))
