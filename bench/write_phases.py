"""Where one write's time goes: a per-phase timeline of sequential `POST /v1/memories`, p50 per mark.

    .venv/bin/python -m bench.write_phases [--n 150] [--warmup 20] [--publish]

Why: the Remember bench gives the write's total beside the floor; to know what to cut, the sessions
kept rebuilding this timeline by hand. It runs the embedded stack in this process (as remember_bench
does) and wraps a few functions of the write path so that each records the first time it is entered
and left, relative to the moment the client sent the request:

- `route:wf:start` / `route:wf:end`: the API starts RememberWorkflow / has its decision;
- `act:*`: the `remember_candidate` local activity, and inside it `inputs:*` (the store's one read),
  `embed:*` (the candidate's embedding, beside the detectors), `detect:*`, `nearest:*` (the index),
  `getmany:*` (reading hits back), `commit:*` (the store's transaction), `upsert:*` (the index);
- `t_end`: the client has the answer.

The wrappers only read the clock; a run measures the same code that serves requests. Every text is
synthetic (bench/load_clients.py). Marks that not every write reaches show their count.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

import api.routes.memories as memories_route  # noqa: E402
import memwarden.detect as detect  # noqa: E402
import memwarden.services.remember as remember_service  # noqa: E402
from bench import report  # noqa: E402
from bench.load_clients import body  # noqa: E402
from bench.phase_marks import MARKS, wrap, wrap_temporal  # noqa: E402
from bench.stack import python_speed_ms  # noqa: E402
from memwarden.stores.sql import SqlStore  # noqa: E402
from memwarden.stores.vectors_edge import EdgeIndex  # noqa: E402
from tests.integration.api_stack import embedded_api  # noqa: E402
from worker import event_loop  # noqa: E402


def instrument() -> None:
    """Wrap the write path's steps (before the stack starts, so every reference sees the wrappers)."""
    wrap(memories_route, "_execute_remember", "route:wf")
    wrap(memories_route, "prescreen", "prescreen")
    wrap(remember_service.RememberService, "_embed", "embed")
    wrap(remember_service.RememberService, "remember", "act")
    wrap(SqlStore, "screen_inputs", "inputs")
    wrap(SqlStore, "get_many", "getmany")
    wrap(SqlStore, "commit_live", "commit")
    wrap(EdgeIndex, "nearest", "nearest")
    wrap(EdgeIndex, "upsert", "upsert")
    wrap(detect, "screen", "detect")
    wrap_temporal()


async def main(args: argparse.Namespace) -> list[tuple[str, float, int]]:
    """(mark, p50 ms after the request was sent, how many writes reached it), in time order."""
    instrument()
    rng = random.Random(7)
    rows: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="memwarden-phases-") as tmp:
        async with embedded_api(Path(tmp)) as api, httpx.AsyncClient(base_url=api.base_url, timeout=60) as http:
            headers = api.auth("bench", "solo")
            for i in range(args.warmup + args.n):
                MARKS.clear()
                start = time.perf_counter()
                answer = await http.post("/v1/memories", headers=headers, json=body(rng, "solo"))
                MARKS["t_end"] = time.perf_counter()
                answer.raise_for_status()
                if i >= args.warmup:
                    rows.append({k: (v - start) * 1000 for k, v in MARKS.items()})
    names = {k for r in rows for k in r}
    table = [(k, statistics.median(r[k] for r in rows if k in r), sum(1 for r in rows if k in r)) for k in names]
    return sorted(table, key=lambda row: row[1])


def markdown(timeline: list[tuple[str, float, int]], writes: int, loop_ms: float) -> str:
    """The run as docs/benchmarks.md shows it: each mark's p50 from the request, in time order."""
    rows = [[f"`{mark}`", round(p50, 2), count] for mark, p50, count in timeline]
    table = report.table(["mark", "p50 ms from the request", "writes reaching it"], rows)
    return f"{table}\n\n{writes} sequential writes; python_loop_ms {loop_ms}."


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=150)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    arguments = parser.parse_args()
    measured = event_loop.run(main(arguments))
    for mark, p50, count in measured:
        print(f"{mark:16s} p50 {p50:7.2f} ms" + ("" if count == arguments.n else f"  (n={count})"))
    if arguments.publish:
        report.publish("write_phases", markdown(measured, arguments.n, python_speed_ms()))
