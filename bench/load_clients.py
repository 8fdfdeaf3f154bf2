"""Concurrent HTTP writers in a process of their own: the load side of `bench/remember_bench.py`.

Why a separate process: agent backends call the API from elsewhere. Run inside the server's own process,
the benchmark's HTTP clients (httpx, their event loop, the JSON) would take the GIL from the server they
measure. Here they share only the machine's cores, as a load generator on the same box does.

Protocol (stdin/stdout, one JSON line each): the parent sends the job (base URL, per-client headers and
names, requests per client, seed); this process builds its clients, prints `{"ready": true}`, waits for one
more line ("go"), runs every client at once, and prints `{"elapsed_s", "decisions", "failed"}`.

A job writes by default: synthetic texts, or a client's own `texts` when its spec has them (so a bench can
hand every system it compares the same writes). With `"op": "search"` each client instead asks its
`queries` in turn through `POST /v1/search` (k from the job, 5 by default), counted as "searched".
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from asyncio.subprocess import PIPE
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx

T = TypeVar("T")
WORDS = (
    "harbour lantern maple quartz orchard violet canyon ember falcon meadow cobalt juniper saffron tundra "
    "willow basalt citrus dune glacier hazel indigo kestrel lagoon marble nectar opal prairie quill russet"
).split()
TEMPLATES = (
    "synthetic: {who} keeps the {a} notebook next to the {b} lamp",
    "synthetic: {who} booked the {a} room for the {b} review on day {n}",
    "synthetic: {who} prefers {a} tea after the {b} meeting",
    "synthetic: {who} finished the {a} report and sent it to the {b} team",
    "synthetic: {who} parks at the {a} garage, level {n}, near the {b} exit",
)


def text(rng: random.Random, who: str) -> str:
    """One synthetic episode about `who`."""
    a, b = rng.sample(WORDS, 2)
    return rng.choice(TEMPLATES).format(who=who, a=a, b=b, n=rng.randint(1, 999))


def body(rng: random.Random, who: str) -> dict[str, Any]:
    """A `POST /v1/memories` body as an agent backend sends it."""
    return {
        "content": text(rng, who),
        "type": "episodic",
        "source_kind": "user",
        "reason": "user_stated_fact",
        "importance": 0.6,
    }


def request(job: dict[str, Any], spec: dict[str, Any], n: int, rng: random.Random) -> tuple[str, dict[str, Any]]:
    """The path and body of a client's n-th request."""
    if job.get("op", "write") == "search":
        queries = spec["queries"]
        return "/v1/search", {"query": queries[n % len(queries)], "k": job.get("k", 5)}
    sent = body(rng, spec["who"])
    if spec.get("texts"):
        sent["content"] = spec["texts"][n % len(spec["texts"])]
    return "/v1/memories", sent


async def run(job: dict[str, Any]) -> dict[str, Any]:
    rng = random.Random(job["seed"])
    decisions: Counter[str] = Counter()
    failed = 0
    limits = httpx.Limits(max_connections=len(job["clients"]))
    async with httpx.AsyncClient(base_url=job["base_url"], timeout=60, limits=limits) as http:
        await http.get("/healthz")  # connection set up before the clock starts
        print(json.dumps({"ready": True}), flush=True)
        await asyncio.to_thread(sys.stdin.readline)

        async def client(spec: dict[str, Any]) -> None:
            nonlocal failed
            for n in range(job["per_client"]):
                path, sent = request(job, spec, n, rng)
                answer = await http.post(path, headers=spec["headers"], json=sent)
                if answer.status_code != 200:
                    failed += 1
                else:
                    decisions[answer.json().get("decision", "searched")] += 1

        start = time.perf_counter()
        await asyncio.gather(*(client(spec) for spec in job["clients"]))
        elapsed = time.perf_counter() - start
    return {"elapsed_s": elapsed, "decisions": dict(decisions), "failed": failed}


ROOT = Path(__file__).resolve().parents[1]


async def run_elsewhere(job: dict[str, Any], measure: Callable[[], T]) -> tuple[dict[str, Any], T, T]:
    """Run `job` in a process of its own (this module as `python -m bench.load_clients`): its report, and
    `measure()` read just before the clients start and just after they finish (before the process exits,
    while its CPU is still listed in /proc)."""
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.load_clients", cwd=ROOT, stdin=PIPE, stdout=PIPE
    )
    assert child.stdin is not None and child.stdout is not None
    child.stdin.write(json.dumps(job).encode() + b"\n")
    await child.stdin.drain()
    if json.loads(await child.stdout.readline()) != {"ready": True}:
        raise RuntimeError("the load clients did not start")
    before = measure()
    child.stdin.write(b"go\n")
    await child.stdin.drain()
    report = json.loads(await child.stdout.readline())
    after = measure()
    await child.wait()
    return report, before, after


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run(json.loads(sys.stdin.readline())))), flush=True)
