"""Scale: one owner's search, ingest rate and resident memory as one tenant grows to 10k, 100k and 1M memories.

    nice -n 10 .venv/bin/python -m bench.scale --data PATH/locomo10.json [--sizes 10000 100000 1000000]
        [--backends sqlite postgres] [--postgres URL] [--queries 200] [--per-owner 1000] [--conversation 7]
        [--cpu-rounds 100] [--max-load-minutes M] [--out FILE] [--publish]

Each backend runs in a process of its own (so one backend's memory is not the next one's), holding the
embedded stack (Temporal dev server, worker, API under uvicorn, Qdrant Edge in the process), its store
SQLite in a temporary directory or a fresh PostgreSQL database created at `--postgres` and dropped after.

One tenant. The measured owner's memories are real: the turns of one LoCoMo conversation
(`--conversation`, default 7, held out from the ranking's tuning), "speaker: text [image: caption]",
each written through `POST /v1/memories` (the whole gate, as bench/locomo.py loads them; a PENDING turn
confirmed by its owner). Every other memory is synthetic (bench/synthetic.py): owners of `--per-owner`
memories each, loaded past the gate (rows through the store, points through the index) and
incrementally, size after size (10k, then +90k, then +900k), the index optimised after each step
(Qdrant builds its HNSW and payload indexes). A size counts every memory in the tenant, the measured
owner's included.

At each size, measured:
- ingest: synthetic memories per second for the step (rows and points), and the optimisation's time apart;
- resident memory (from /proc): this process (worker, API, Qdrant Edge, the SQLite page cache) and the dev
  server; the optimiser's peak (it runs in a child process); the PostgreSQL server is not counted;
- `POST /v1/search` (k=5) by an agent serving the measured owner, asking that conversation's category 1-4
  questions in turn, interleaved with the Temporal floor (bench/floor.py): p50 / p95 of both after 20
  warm-up rounds; and R@5 of the owner's questions (each asked once at least), the check that the bulk did
  not drown the owner's evidence;
- CPU per search: `--cpu-rounds` searches back to back between two readings of /proc (this process and
  the dev server).
A size whose bulk, at the rate measured over its first chunks, would take longer than `--max-load-minutes`
is not loaded (nor any larger one): the row says so with that rate.
Then the growth of search p50 from the smallest size to the largest, per backend, against the target
(at most 1.3x from 10k to 1M), and the same for search p50 / floor p50 (the machine's drift removed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import resource
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import report
from bench.locomo import DEFAULT_DATA, Corpus, evidence_ids, load_corpus, load_turns, owner_of, recall
from bench.stack import Stack, cpu_ms_per_call, python_speed_ms, rounded, running_stack, summary_ms
from bench.synthetic import bulk_load, optimise_index, pool_vectors, sentence_pool
from worker import event_loop

TENANT = "scale"
TARGET_GROWTH = 1.3
"""Search p50 at the largest size over the smallest's, at most (issue 26: from 10k to 1M)."""
WARMUP = 20
LOAD_CHUNK = 50_000
K = 5
BACKENDS = ("sqlite", "postgres")
DEFAULT_POSTGRES = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


def owner_data(corpus: Corpus, conv: int) -> Corpus:
    """The measured owner's data: one conversation's turns and its questions, nothing of the others."""
    turns = [t for t in corpus.turns if t.conv == conv]
    questions = [q for q in corpus.questions if q.conv == conv]
    if not turns or not questions:
        raise ValueError(f"conversation {conv} has no turns or no category 1-4 questions in the data")
    return Corpus(turns=turns, questions=questions)


def status_kb(text: str, field: str) -> int | None:
    """A `kB` field of a /proc/<pid>/status text (VmRSS, VmHWM, ...); None when absent."""
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name == field:
            return int(value.split()[0])
    return None


def memory_mb(pid: int, field: str = "VmRSS") -> float | None:
    """Resident memory of a live process in MB (VmRSS; VmHWM for its peak); None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    kb = status_kb(text, field)
    return round(kb / 1024, 1) if kb is not None else None


def growth(p50_by_size: Mapping[int, float]) -> float | None:
    """p50 at the largest size over p50 at the smallest; None with fewer than two sizes."""
    if len(p50_by_size) < 2:
        return None
    sizes = sorted(p50_by_size)
    return round(p50_by_size[sizes[-1]] / p50_by_size[sizes[0]], 2)


def meets_target(ratio: float | None) -> bool | None:
    return None if ratio is None else ratio <= TARGET_GROWTH


def growths(results: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A backend's growth of search p50, and of search p50 / floor p50, over the sizes it measured."""
    by_size = {int(size): r for size, r in results.items() if "not_loaded" not in r}
    p50 = growth({size: r["search API"]["p50"] for size, r in by_size.items()})
    return {
        "growth p50": p50,
        "growth p50 / floor p50": growth({size: r["ratio p50 API/floor"] for size, r in by_size.items()}),
        "meets target": meets_target(p50),
    }


def memories(stack: Stack) -> dict[str, float | None]:
    """Resident memory now: this process, its peak so far, the dev server, the optimiser's peak."""
    children_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # finished children: the optimiser
    return {
        "bench_mb": memory_mb(os.getpid()),
        "bench_peak_mb": memory_mb(os.getpid(), "VmHWM"),
        "dev_server_mb": memory_mb(stack.dev_pid) if stack.dev_pid else None,
        "optimiser_peak_mb": round(children_kb / 1024, 1) if children_kb else None,
    }


async def measure(
    stack: Stack, data: Corpus, mapping: dict[tuple[int, str], str], rounds: int, cpu_rounds: int
) -> dict[str, Any]:
    """Searches for the owner's questions in turn, each after a floor; R@5 on each question's first answer."""
    conv = data.questions[0].conv
    token = stack.token(tenant=TENANT, sub=f"svc-{conv}", role="agent", agent="bench", on_behalf_of=owner_of(conv))
    headers = {"Authorization": f"Bearer {token}"}

    async def search(i: int) -> list[str]:
        answer = await stack.http.post(
            "/v1/search", json={"query": data.questions[i % len(data.questions)].text, "k": K}, headers=headers
        )
        answer.raise_for_status()
        return [r["memory_id"] for r in answer.json()["results"]]

    floor, api = [], []
    recalls: dict[int, float] = {}
    for i in range(WARMUP + max(rounds, len(data.questions) - WARMUP)):
        floored = await stack.floor()
        start = time.perf_counter()
        ranked = await search(i)
        took = time.perf_counter() - start
        if i >= WARMUP:  # the first rounds warm every path up; they are not timed
            floor.append(floored)
            api.append(took)
        q = i % len(data.questions)
        if q not in recalls:
            recalls[q] = recall(ranked, evidence_ids(mapping, data.questions[q]), K)
    f, a = summary_ms(floor), summary_ms(api)
    cpu = await cpu_ms_per_call(search, cpu_rounds) if cpu_rounds > 0 else {}
    return {
        "search API": a,
        "floor": f,
        "ratio p50 API/floor": round(a["p50"] / f["p50"], 2),
        "rounds": len(api),
        "R@5": round(sum(recalls.values()) / len(recalls), 3),
        "questions": len(recalls),
        "cpu_ms_per_search": round(sum(cpu.values()), 1) if cpu else None,
        "cpu_ms_per_search_by_part": rounded(cpu),
    }


def projected_s(done: int, elapsed: float, total: int) -> float:
    """Seconds to load `total` memories at the rate of the first `done` (`elapsed` seconds)."""
    return elapsed / done * total


async def load_step(
    stack: Stack, start: int, stop: int, args: argparse.Namespace, pool: list[str], vectors: Any
) -> tuple[int, float]:
    """Synthetic memories start..stop-1 in chunks, progress printed; stops early when the step, at the rate
    measured so far, would take longer than `--max-load-minutes`. Returns (loaded up to, seconds)."""
    started = time.monotonic()
    lo = start
    while lo < stop:
        hi = min(lo + LOAD_CHUNK, stop)
        await bulk_load(stack, lo, hi, args.per_owner, pool, vectors, tenant=TENANT, optimise=False)
        lo, elapsed = hi, time.monotonic() - started
        if lo < stop:
            expected = projected_s(lo - start, elapsed, stop - start)
            step = f"+{lo - start:,} of +{stop - start:,} in {elapsed:.0f}s"
            print(f"  {args.run_backend}: {step}, {expected:.0f}s for the step at this rate", flush=True)
            if args.max_load_minutes and expected > args.max_load_minutes * 60:
                return lo, elapsed
    return lo, time.monotonic() - started


async def run_backend(args: argparse.Namespace) -> dict[str, Any]:
    """One backend, every size, in this process."""
    began = time.monotonic()
    data = owner_data(load_corpus(args.data), args.conversation)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="memwarden-scale-") as tmp:
        async with running_stack(Path(tmp), database_url=args.database_url or None) as stack:
            idle = memories(stack)
            started = time.monotonic()
            mapping, decisions = await load_turns(stack, data, TENANT)
            owner_s = time.monotonic() - started
            real = len(set(mapping.values()))
            print(f"owner: {len(data.turns)} turns through POST /v1/memories in {owner_s:.0f}s: {dict(decisions)}")
            pool = sentence_pool(random.Random(7))
            vectors = await pool_vectors(stack, pool)
            loaded = 0
            for size in sorted(args.sizes):
                target = size - real
                if target < loaded:
                    raise ValueError(f"size {size} is below what is loaded already ({loaded + real})")
                done, load_s = await load_step(stack, loaded, target, args, pool, vectors)
                added, wanted, loaded = done - loaded, target - loaded, done
                row: dict[str, Any] = {
                    "added": added,
                    "ingest_s": round(load_s, 1),
                    "ingest_per_s": round(added / load_s) if load_s > 0 else None,
                }
                if done < target:  # over the budget: this size is not measured, nor any larger one
                    row["not_loaded"] = {"wanted": wanted, "projected_s": round(projected_s(added, load_s, wanted))}
                    results[str(size)] = row
                    print(json.dumps({args.run_backend: {size: row}}), flush=True)
                    break
                started = time.monotonic()
                await optimise_index(stack)
                row["optimise_s"] = round(time.monotonic() - started, 1)
                row["memory"] = memories(stack)
                step = f"+{added} in {load_s:.0f}s, optimised in {row['optimise_s']:.0f}s"
                print(f"{args.run_backend} {size}: {step}", flush=True)
                row |= await measure(stack, data, mapping, args.queries, args.cpu_rounds)
                results[str(size)] = row
                print(json.dumps({args.run_backend: {size: row}}), flush=True)
    return {
        "owner": {
            "conversation": args.conversation,
            "turns": len(data.turns),
            "memories": real,
            "decisions": dict(decisions),
            "seconds": round(owner_s, 1),
        },
        "idle_memory": idle,
        "wall_s": round(time.monotonic() - began),
        "results": results,
    }


@contextlib.asynccontextmanager
async def backend_database(backend: str, admin_url: str) -> AsyncIterator[str]:
    """The store's URL for a backend: "" (SQLite in the stack's directory), or a fresh PostgreSQL
    database next to `admin_url`'s, dropped on exit."""
    if backend == "sqlite":
        yield ""
        return
    from tests.store_support import temporary_database

    async with temporary_database(admin_url, "mw_scale") as url:
        yield url


async def run_child(args: argparse.Namespace, backend: str, database_url: str) -> dict[str, Any]:
    """This bench again, in a process of its own, for one backend; its result read back from a file."""
    with tempfile.TemporaryDirectory(prefix="memwarden-scale-result-") as tmp:
        out = Path(tmp) / "result.json"
        command = [
            sys.executable,
            "-m",
            "bench.scale",
            "--run-backend",
            backend,
            "--database-url",
            database_url,
            "--result-file",
            str(out),
            "--data",
            str(args.data),
            "--conversation",
            str(args.conversation),
            "--queries",
            str(args.queries),
            "--per-owner",
            str(args.per_owner),
            "--cpu-rounds",
            str(args.cpu_rounds),
            "--max-load-minutes",
            str(args.max_load_minutes),
            "--sizes",
            *map(str, args.sizes),
        ]
        child = await asyncio.create_subprocess_exec(*command, stdin=asyncio.subprocess.DEVNULL)
        if await child.wait() != 0:
            raise RuntimeError(f"the {backend} run failed ({child.returncode})")
        return json.loads(out.read_text())


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    backends: dict[str, Any] = {}
    for backend in args.backends:
        async with backend_database(backend, args.postgres) as url:
            backends[backend] = await run_child(args, backend, url)
    for run in backends.values():
        run |= growths(run["results"])
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} cpus={len(os.sched_getaffinity(0))} python={platform.python_version()}",
        "python_loop_ms": python_speed_ms(),
        "per_owner": args.per_owner,
        "k": K,
        "target_growth": TARGET_GROWTH,
        "backends": backends,
    }


def _growth_line(backend: str, run: dict[str, Any]) -> str:
    sizes = sorted(int(s) for s, r in run["results"].items() if "not_loaded" not in r)
    if run["growth p50"] is None:
        return f"{backend}: one size measured, no growth."
    verdict = "met" if run["meets target"] else "missed"
    return (
        f"{backend}: search p50 grew **{run['growth p50']}x** from {sizes[0]:,} to {sizes[-1]:,} memories "
        f"(target at most {TARGET_GROWTH}x: {verdict}); search p50 / floor p50 grew {run['growth p50 / floor p50']}x."
    )


def markdown(result: dict[str, Any]) -> str:
    """The run as docs/benchmarks.md shows it: a row per backend and size, then the growth per backend."""
    headers = [
        "backend",
        "memories",
        "ingest memories/s (added)",
        "optimise s",
        "RSS MB bench / dev server",
        "search p50 / p95 ms",
        "floor p50 ms",
        "CPU ms per search",
        "R@5 owner's questions",
    ]
    rows, notes = [], []
    for backend, run in result["backends"].items():
        for size, r in sorted(run["results"].items(), key=lambda item: int(item[0])):
            if "not_loaded" in r:
                rows.append(
                    [backend, f"{int(size):,}", f"{r['ingest_per_s']:,} (of {r['added']:,})", "not loaded", *[""] * 5]
                )
                minutes = r["not_loaded"]["projected_s"] / 60
                notes.append(
                    f"{backend} at {int(size):,}: not loaded; at the {r['ingest_per_s']:,}/s measured over the "
                    f"first {r['added']:,}, the +{r['not_loaded']['wanted']:,} would take {minutes:.1f} min."
                )
                continue
            mem = r["memory"]
            rows.append(
                [
                    backend,
                    f"{int(size):,}",
                    f"{r['ingest_per_s']:,} ({r['added']:,})",
                    r["optimise_s"],
                    f"{mem['bench_mb']:,} / {mem['dev_server_mb']}",
                    f"{r['search API']['p50']} / {r['search API']['p95']}",
                    r["floor"]["p50"],
                    r["cpu_ms_per_search"],
                    r["R@5"],
                ]
            )
        measured = [r for r in run["results"].values() if "not_loaded" not in r]
        owner, largest = run["owner"], max(measured, key=lambda r: r["memory"]["bench_mb"] or 0)
        decisions = ", ".join(f"{n} {d}" for d, n in sorted(owner["decisions"].items()))
        notes.append(
            f"{backend}: the owner's {owner['turns']} turns through the gate in {owner['seconds']} s ({decisions}); "
            f"peak RSS {largest['memory']['bench_peak_mb']:,} MB, optimiser peak "
            f"{largest['memory']['optimiser_peak_mb']} MB; {run['wall_s']:,} s in all."
        )
    first = next(iter(result["backends"].values()))
    sample = next(r for r in first["results"].values() if "not_loaded" not in r)
    summary = (
        f"LoCoMo conversation {first['owner']['conversation']} is the measured owner "
        f"({sample['questions']} questions, k={result['k']}); {sample['rounds']} timed rounds per size after "
        f"{WARMUP} warm-up rounds; the other owners hold {result['per_owner']:,} synthetic memories each; "
        f"python_loop_ms {result['python_loop_ms']}."
    )
    growth_lines = [_growth_line(b, run) for b, run in result["backends"].items()]
    return "\n\n".join([report.table(headers, rows), *growth_lines, summary, " ".join(notes)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="a database to connect to for CREATE DATABASE")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo's locomo10.json")
    parser.add_argument("--conversation", type=int, default=7, help="the LoCoMo conversation of the measured owner")
    parser.add_argument(
        "--queries", type=int, default=200, help="timed searches per size (every question once at least)"
    )
    parser.add_argument("--per-owner", type=int, default=1000)
    parser.add_argument("--cpu-rounds", type=int, default=100, help="searches back to back for CPU per search (0: off)")
    parser.add_argument(
        "--max-load-minutes",
        type=float,
        default=0,
        help="stop a size's load when it would take longer (its measured rate reported instead); 0: no limit",
    )
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON result here")
    parser.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    parser.add_argument("--run-backend", choices=BACKENDS, help=argparse.SUPPRESS)
    parser.add_argument("--database-url", default="", help=argparse.SUPPRESS)
    parser.add_argument("--result-file", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run_backend:  # the child process of one backend
        result = event_loop.run(run_backend(args))
        args.result_file.write_text(json.dumps(result))
        return
    result = asyncio.run(main_async(args))
    text = json.dumps(result, indent=2)
    print(text)
    print("\n".join(_growth_line(b, run) for b, run in result["backends"].items()))
    if args.out:
        args.out.write_text(text + "\n")
    if args.publish:
        report.publish("scale", markdown(result))


if __name__ == "__main__":
    main()
