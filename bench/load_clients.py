"""Concurrent HTTP writers in a process of their own: the load side of `bench/remember_bench.py`.

Why a separate process: agent backends call the API from elsewhere. Run inside the server's own process,
the benchmark's HTTP clients (httpx, their event loop, the JSON) would take the GIL from the server they
measure. Here they share only the machine's cores, as a load generator on the same box does.

Protocol (stdin/stdout, one JSON line each): the parent sends the job (base URL, per-client headers and
names, writes per client, seed); this process builds its clients, prints `{"ready": true}`, waits for one
more line ("go"), runs every client at once, and prints `{"elapsed_s", "decisions", "failed"}`.
Every text is synthetic.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from collections import Counter
from typing import Any

import httpx

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
            for _ in range(job["per_client"]):
                answer = await http.post("/v1/memories", headers=spec["headers"], json=body(rng, spec["who"]))
                if answer.status_code != 200:
                    failed += 1
                else:
                    decisions[answer.json()["decision"]] += 1

        start = time.perf_counter()
        await asyncio.gather(*(client(spec) for spec in job["clients"]))
        elapsed = time.perf_counter() - start
    return {"elapsed_s": elapsed, "decisions": dict(decisions), "failed": failed}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(run(json.loads(sys.stdin.readline())))), flush=True)
