"""Search latency through the API beside the Temporal floor, measured in the same run, at 10k and 100k memories.

    nice -n 10 .venv/bin/python -m bench.latency [--sizes 10000 100000] [--queries 300] [--per-owner 1000]
        [--profile FILE]   # also: pyinstrument over API searches at the largest size (pip install '.[bench]')
        [--publish]        # also: rewrite the `latency` section of docs/benchmarks.md (bench/report.py)

One embedded stack in this process (Temporal dev server, worker, API under uvicorn; the API's
client shares the worker's process, so workflows start eagerly, as under `memwarden up`).
Memories are bulk-loaded past the gate as bench/synthetic.py describes (rows through the store, points
through the index, then the index optimised), owners of `--per-owner` memories each; every query is a
search by an agent serving one random owner, so the filter narrows 100k to that owner's. Queries are
other synthetic sentences, embedded for real inside every search (the API's path does that itself).

Measured, interleaved one after another so both see the same machine load:
- `floor`: a workflow running one local activity that does nothing, eagerly started (bench/floor.py);
- `search API`: `POST /v1/search` (k=5) over HTTP, end to end, as an agent backend sees it;
- `search workflow`: RetrieveWorkflow through the client without HTTP (where the time goes);
- `http floor`: `GET /healthz`, what HTTP alone costs.
Then CPU per operation (this process with every thread, and the dev server; from /proc, by part):
`--cpu-rounds` floors back to back, then as many API searches, then as many `GET /healthz` (the HTTP
round trip alone, the bench's client included), each batch between two readings.
Why: the ratio target is a latency one, but on 2 cores what a search does beyond the floor has to run
somewhere; CPU is the figure the machine's noise hardly moves.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import report
from bench.stack import Stack, cpu_ms_per_call, python_speed_ms, rounded, running_stack, summary_ms
from bench.synthetic import bulk_load, owner, pool_vectors, sentence, sentence_pool
from memwarden.identity import Principal, Role, read_filter
from memwarden.records import RetrieveInput
from worker import event_loop
from workflows.retrieve import RetrieveWorkflow

TENANT = "latency"


async def measure(stack: Stack, owners: int, queries: list[str], seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    tq = stack.settings.temporal_task_queue
    floor, api, direct, http = [], [], [], []
    tokens: dict[int, str] = {}
    for i, q in enumerate(queries):
        o = rng.randrange(owners)
        if o not in tokens:
            tokens[o] = stack.token(tenant=TENANT, sub=f"svc-{o}", role="agent", agent="bench", on_behalf_of=owner(o))
        floor.append(await stack.floor())

        start = time.perf_counter()
        answer = await stack.http.post(
            "/v1/search", json={"query": q, "k": 5}, headers={"Authorization": f"Bearer {tokens[o]}"}
        )
        api.append(time.perf_counter() - start)
        answer.raise_for_status()
        if not answer.json()["results"]:
            raise RuntimeError("a latency query returned nothing: the load is not what the bench expects")

        principal = Principal(tenant=TENANT, sub=f"svc-{o}", role=Role.AGENT, agent="bench", on_behalf_of=owner(o))
        request = RetrieveInput(query=q, k=5, read_filter=read_filter(principal), actor=principal.actor)
        start = time.perf_counter()
        await stack.client.execute_workflow(
            RetrieveWorkflow.run, request, id=f"lat-{uuid.uuid4()}", task_queue=tq, request_eager_start=True
        )
        direct.append(time.perf_counter() - start)

        start = time.perf_counter()
        (await stack.http.get("/healthz")).raise_for_status()
        http.append(time.perf_counter() - start)
        if i == 19:  # the first 20 rounds warm every path up; they are not counted
            floor, api, direct, http = [], [], [], []
    f, a = summary_ms(floor), summary_ms(api)
    return {
        "floor": f,
        "search API": a,
        "search workflow": summary_ms(direct),
        "http floor": summary_ms(http),
        "ratio p50 API/floor": round(a["p50"] / f["p50"], 2),
        "ratio p95 API/floor": round(a["p95"] / f["p95"], 2),
        "rounds": len(floor),
    }


async def cpu_per_op(stack: Stack, owners: int, queries: list[str], rounds: int, seed: int) -> dict[str, Any]:
    """CPU ms per floor workflow, per API search and per HTTP round trip (one batch each), by part."""
    rng = random.Random(seed)
    tokens = [
        stack.token(tenant=TENANT, sub=f"svc-{o}", role="agent", agent="bench", on_behalf_of=owner(o))
        for o in (rng.randrange(owners) for _ in range(rounds))
    ]

    async def search(i: int) -> None:
        answer = await stack.http.post(
            "/v1/search",
            json={"query": queries[i % len(queries)], "k": 5},
            headers={"Authorization": f"Bearer {tokens[i]}"},
        )
        answer.raise_for_status()

    async def http_floor(_: int) -> None:
        (await stack.http.get("/healthz")).raise_for_status()

    async def floor_run(_: int) -> None:
        await stack.floor()

    floor = await cpu_ms_per_call(floor_run, rounds)
    searched = await cpu_ms_per_call(search, rounds)
    http = await cpu_ms_per_call(http_floor, rounds)
    return {
        "rounds": rounds,
        "cpu_ms_per_floor_workflow": round(sum(floor.values()), 1),
        "cpu_ms_per_api_search": round(sum(searched.values()), 1),
        # the bench's own HTTP client is in this process too: this bounds its share of the search's CPU
        "cpu_ms_per_http_floor": round(sum(http.values()), 1),
        "cpu_ms_per_floor_workflow_by_part": rounded(floor),
        "cpu_ms_per_api_search_by_part": rounded(searched),
    }


async def profile(stack: Stack, owners: int, queries: list[str], out: Path) -> None:
    """pyinstrument over searches through the API (the event loop's thread: API, worker and activity
    all run on it; work in threads shows as the awaits that wait for it). Not part of the figures."""
    from pyinstrument import Profiler

    rng = random.Random(0)
    profiler = Profiler(interval=0.0005, async_mode="disabled")
    profiler.start()
    for q in queries:
        o = rng.randrange(owners)
        token = stack.token(tenant=TENANT, sub=f"svc-{o}", role="agent", agent="bench", on_behalf_of=owner(o))
        headers = {"Authorization": f"Bearer {token}"}
        answer = await stack.http.post("/v1/search", json={"query": q, "k": 5}, headers=headers)
        answer.raise_for_status()
    profiler.stop()
    await asyncio.to_thread(out.write_text, profiler.output_text(unicode=False, show_all=False))
    print(f"profile of {len(queries)} searches written to {out}", flush=True)


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(7)
    pool = sentence_pool(rng)
    queries = [sentence(rng) for _ in range(args.queries + 20)]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="memwarden-latency-") as tmp:
        async with running_stack(Path(tmp)) as stack:
            vectors = await pool_vectors(stack, pool)
            loaded = 0
            for size in sorted(args.sizes):
                started = time.monotonic()
                await bulk_load(stack, loaded, size, args.per_owner, pool, vectors, tenant=TENANT)
                print(f"loaded {size} memories (+{size - loaded}) in {time.monotonic() - started:.0f}s", flush=True)
                loaded = size
                owners = max(1, size // args.per_owner)
                results[str(size)] = await measure(stack, owners, queries, seed=size)
                if args.cpu_rounds > 0:
                    results[str(size)]["cpu"] = await cpu_per_op(stack, owners, queries, args.cpu_rounds, seed=size + 1)
                print(json.dumps({size: results[str(size)]}), flush=True)
            if args.profile is not None:
                await profile(stack, max(1, loaded // args.per_owner), queries, args.profile)
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} cpus={len(os.sched_getaffinity(0))} python={platform.python_version()}",
        "python_loop_ms": python_speed_ms(),
        "per_owner": args.per_owner,
        "k": 5,
        "results": results,
    }


def markdown(result: dict[str, Any]) -> str:
    """The run as docs/benchmarks.md shows it: one row per size, then CPU by part."""
    rows, parts = [], []
    rounds = 0
    for size, r in sorted(result["results"].items(), key=lambda item: int(item[0])):
        f, a, w, h = r["floor"], r["search API"], r["search workflow"], r["http floor"]
        cpu = r.get("cpu", {})
        rounds = r["rounds"]
        rows.append(
            [
                f"{int(size):,}",
                f"{f['p50']} / {f['p95']}",
                f"{a['p50']} / {a['p95']}",
                w["p50"],
                h["p50"],
                f"{r['ratio p50 API/floor']}x",
                cpu.get("cpu_ms_per_floor_workflow", ""),
                cpu.get("cpu_ms_per_api_search", ""),
                cpu.get("cpu_ms_per_http_floor", ""),
            ]
        )
        if cpu:
            floor_parts, search_parts = cpu["cpu_ms_per_floor_workflow_by_part"], cpu["cpu_ms_per_api_search_by_part"]
            moved = ", ".join(
                f"{part} {floor_parts.get(part, 0)} -> {search_parts.get(part, 0)}"
                for part in sorted(set(floor_parts) | set(search_parts))
            )
            parts.append(f"CPU ms by part at {int(size):,}, floor -> search: {moved}.")
    headers = [
        "memories",
        "floor p50 / p95 ms",
        "search API p50 / p95 ms",
        "search workflow p50 ms",
        "HTTP alone p50 ms",
        "ratio p50 API / floor",
        "CPU ms per floor",
        "CPU ms per search",
        "CPU ms per HTTP round trip",
    ]
    notes = (
        f"{rounds} rounds per size after 20 warm-up rounds, k={result['k']}, owners of {result['per_owner']:,} "
        f"memories each; python_loop_ms {result['python_loop_ms']}."
    )
    return "\n\n".join([report.table(headers, rows), notes, *parts])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--per-owner", type=int, default=1000)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--cpu-rounds", type=int, default=200, help="floors, then searches, for CPU per op (0: off)")
    parser.add_argument("--profile", type=Path, default=None, help="write a pyinstrument profile here")
    parser.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    args = parser.parse_args()
    result = event_loop.run(main_async(args))
    text = json.dumps(result, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    if args.publish:
        report.publish("latency", markdown(result))


if __name__ == "__main__":
    main()
