"""Where one search's time goes: a per-phase timeline of sequential `POST /v1/search`, beside the floor.

    nice -n 10 .venv/bin/python -m bench.search_phases [--size 10000] [--n 150] [--warmup 20] [--publish]

Why: the latency bench gives a search's total beside the Temporal floor; this says which part of it
can overlap the workflow and which cannot. It loads `--size` memories as `bench.latency` does, then
runs searches one after another, each followed by one floor workflow (interleaved, so both see the
same machine), wrapping a few functions of the search path so that each records the first time it is
entered and left, relative to the moment the client sent the request:

- `route:wf:start` / `route:wf:end`: the API starts RetrieveWorkflow / has its result;
- `act:*`: the `search_memories` local activity, and inside it `embed:*` (the query's embedding);
- `gather:*`: the reads (both index queries `hybrid:*`, the store's re-check `meta:*`, ranking);
- `answer:*`: the answer's transaction (re-check, content, audit append, drop of the parked query);
- `t_end`: the client has the answer.

The two serial ends are what no overlap can hide: everything before the workflow starts (HTTP, auth,
the route) and everything after its result (the answer's transaction, the response). The workflow in
between has the floor's shape (a start, one local activity, a result) and cannot be cheaper than it,
so `1 + (before + after) / floor` is a lower bound on the ratio, printed with the timeline. The
wrappers only read the clock. Every text is synthetic.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import api.routes.search as search_route
import memwarden.services.retrieve as retrieve_service
from bench import report
from bench.latency import TENANT
from bench.phase_marks import MARKS, wrap, wrap_temporal
from bench.stack import python_speed_ms, running_stack
from bench.synthetic import bulk_load, owner, pool_vectors, sentence, sentence_pool
from memwarden.stores.sql import SqlStore
from memwarden.stores.vectors_edge import EdgeIndex
from worker import event_loop


def instrument() -> None:
    """Wrap the search path's steps (before the stack starts, so every reference sees the wrappers)."""
    wrap(search_route, "_run_workflow", "route:wf")
    wrap(retrieve_service.RetrieveService, "_embed", "embed")
    wrap(retrieve_service.RetrieveService, "_gather_for", "gather")
    wrap(retrieve_service.RetrieveService, "search", "act")
    wrap(EdgeIndex, "hybrid", "hybrid")
    wrap(SqlStore, "eligible_meta", "meta")
    wrap(SqlStore, "answer_search", "answer")
    wrap_temporal()


async def main(args: argparse.Namespace) -> dict[str, Any]:
    instrument()
    rng = random.Random(7)
    pool = sentence_pool(rng)
    rows: list[dict[str, float]] = []
    floors: list[float] = []
    with tempfile.TemporaryDirectory(prefix="memwarden-search-phases-") as tmp:
        async with running_stack(Path(tmp)) as stack:
            vectors = await pool_vectors(stack, pool)
            await bulk_load(stack, 0, args.size, args.per_owner, pool, vectors, tenant=TENANT)
            owners = max(1, args.size // args.per_owner)
            for i in range(args.warmup + args.n):
                o = rng.randrange(owners)
                token = stack.token(tenant=TENANT, sub=f"svc-{o}", role="agent", agent="bench", on_behalf_of=owner(o))
                MARKS.clear()
                start = time.perf_counter()
                answer = await stack.http.post(
                    "/v1/search", json={"query": sentence(rng), "k": 5}, headers={"Authorization": f"Bearer {token}"}
                )
                MARKS["t_end"] = time.perf_counter()
                answer.raise_for_status()
                marks = {k: (v - start) * 1000 for k, v in MARKS.items()}
                floor = await stack.floor() * 1000
                if i >= args.warmup:
                    rows.append(marks)
                    floors.append(floor)
    names = {k for r in rows for k in r}
    timeline = sorted(
        ((k, round(statistics.median(r[k] for r in rows if k in r), 2), sum(1 for r in rows if k in r)) for k in names),
        key=lambda row: row[1],
    )
    before = statistics.median(r["route:wf:start"] for r in rows)
    after = statistics.median(r["t_end"] - r["route:wf:end"] for r in rows)
    floor_p50 = statistics.median(floors)
    return {
        "python_loop_ms": python_speed_ms(),
        "size": args.size,
        "searches": len(rows),
        "timeline_p50_ms": timeline,
        "before_workflow_p50_ms": round(before, 2),
        "after_workflow_p50_ms": round(after, 2),
        "workflow_p50_ms": round(statistics.median(r["route:wf:end"] - r["route:wf:start"] for r in rows), 2),
        "search_p50_ms": round(statistics.median(r["t_end"] for r in rows), 2),
        "floor_p50_ms": round(floor_p50, 2),
        "ratio_lower_bound": round(1 + (before + after) / floor_p50, 2),
    }


def markdown(result: dict[str, Any]) -> str:
    """The run as docs/benchmarks.md shows it: the serial ends and the bound, then the timeline."""
    summary = report.table(
        [
            "memories",
            "before the workflow p50 ms",
            "the workflow p50 ms",
            "after its result p50 ms",
            "search p50 ms",
            "floor p50 ms (same run)",
            "ratio lower bound",
        ],
        [
            [
                f"{result['size']:,}",
                result["before_workflow_p50_ms"],
                result["workflow_p50_ms"],
                result["after_workflow_p50_ms"],
                result["search_p50_ms"],
                result["floor_p50_ms"],
                f"{result['ratio_lower_bound']}x",
            ]
        ],
    )
    timeline = report.table(
        ["mark", "p50 ms from the request", "searches reaching it"],
        [[f"`{mark}`", p50, count] for mark, p50, count in result["timeline_p50_ms"]],
    )
    notes = f"{result['searches']} sequential searches; python_loop_ms {result['python_loop_ms']}."
    return "\n\n".join([summary, timeline, notes])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--per-owner", type=int, default=1000)
    parser.add_argument("--n", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    arguments = parser.parse_args()
    result = event_loop.run(main(arguments))
    for mark, p50, count in result["timeline_p50_ms"]:
        print(f"{mark:16s} p50 {p50:7.2f} ms  (n={count})")
    for key, value in result.items():
        if key != "timeline_p50_ms":
            print(f"{key}: {value}")
    if arguments.publish:
        report.publish(f"search_phases-{arguments.size}", markdown(result))
