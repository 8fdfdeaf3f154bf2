"""Search latency with and without read-time revalidation, side by side in one run.

Two owners hold the same memories (the same texts, so the index does the same work for both): one
owner's cite a system of record whose sources.toml entry checks at every read (`freshness_seconds =
0`), the other's cite none. Searches alternate between them through `POST /v1/search` (k=5), so every
hit of the first is checked at the source (k conditional GETs in parallel, each answered 304 after
a fixed delay) and confirmed in the store, while the second pays nothing. Beside them, in the same
run: one conditional GET to the source from this process (the round trip the read is expected to add).

The source server runs in a child process (its own GIL), steered as in the tests.

    nice -n 10 .venv/bin/python -m bench.revalidate_bench [--rounds 200] [--delay-ms 20] [--publish]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import platform
import random
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench import report
from bench.stack import running_stack, summary_ms
from memwarden.records import MemoryRecord, MemoryType, SourceKind, SourceRef, content_hash
from memwarden.stores.vectors import index_point
from memwarden.stores.vectors_edge import EdgeIndex
from tests.source_server import SourceServer, sources_toml

TENANT = "bench-revalidate"
WORDS = (
    "kiln glaze clay wheel studio course booking room schedule thursday monday pottery raku bisque "
    "order delivery balance account locker pass membership evening morning teacher class fee"
).split()


def sentence(rng: random.Random) -> str:
    return "synthetic: " + " ".join(rng.choice(WORDS) for _ in range(9))


def serve(port_out: Any, keys: list[str], delay: float, stop: Any) -> None:
    """Child process: a source that knows every key at version v1 and answers after `delay`."""
    with SourceServer() as server:
        for key in keys:
            server.put(key, f"synthetic record {key}", "v1")
        server.set(delay=delay)
        port_out.put(server.port)
        stop.wait()


async def load(stack: Any, texts: list[str], owner: str, system: str | None) -> None:
    now = datetime.now(UTC)
    records = [
        MemoryRecord(
            id=str(uuid.uuid4()),
            tenant_id=TENANT,
            owner_id=owner,
            type=MemoryType.FACT,
            content=text,
            content_hash=content_hash(text),
            source_kind=SourceKind.USER,
            source_ref=SourceRef(system=system, key=f"k-{i}", version="v1") if system else None,
            reason="user_stated_fact",
            created_at=now,
            updated_at=now,
            last_confirmed_at=now,
        )
        for i, text in enumerate(texts)
    ]
    dense = np.array(await asyncio.to_thread(stack.deps.embedder.embed, texts), dtype=np.float32).tolist()
    await stack.deps.store.bulk_insert_memories(records)
    await stack.deps.index.upsert([index_point(r, d) for r, d in zip(records, dense, strict=True)])


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(11)
    texts = list(dict.fromkeys(sentence(rng) for _ in range(args.memories * 2)))[: args.memories]
    queries = [sentence(rng) for _ in range(args.rounds + 20)]
    ctx = multiprocessing.get_context("spawn")
    port_q, stop = ctx.Queue(), ctx.Event()
    child = ctx.Process(target=serve, args=(port_q, [f"k-{i}" for i in range(len(texts))], args.delay_ms / 1000, stop))
    child.start()
    try:
        port = port_q.get(timeout=30)
        url = f"http://127.0.0.1:{port}/records/{{key}}"
        with tempfile.TemporaryDirectory(prefix="memwarden-revalidate-") as tmp:
            data_dir = Path(tmp)
            (data_dir / "sources.toml").write_text(sources_toml("bench", url, timeout_ms=1000, freshness_seconds=0))
            async with running_stack(data_dir) as stack:
                await load(stack, texts, "checked", "bench")
                await load(stack, texts, "plain", None)
                if isinstance(stack.deps.index, EdgeIndex):
                    await stack.deps.index.vacuum()
                tokens = {
                    o: stack.token(tenant=TENANT, sub=f"svc-{o}", role="agent", agent="bench", on_behalf_of=o)
                    for o in ("checked", "plain")
                }
                with_check, without, rtt = [], [], []
                verified = 0
                async with httpx.AsyncClient() as direct:
                    for i, q in enumerate(queries):
                        for o, sink in (("checked", with_check), ("plain", without)):
                            start = time.perf_counter()
                            answer = await stack.http.post(
                                "/v1/search",
                                json={"query": q, "k": args.k},
                                headers={"Authorization": f"Bearer {tokens[o]}"},
                            )
                            sink.append(time.perf_counter() - start)
                            answer.raise_for_status()
                            body = answer.json()
                            if len(body["results"]) != args.k:
                                raise RuntimeError(f"expected {args.k} results, got {len(body['results'])}")
                            if o == "checked":
                                verified += sum(r["freshness"] == "verified" for r in body["results"])
                        start = time.perf_counter()
                        got = await direct.get(url.replace("{key}", "k-0"), headers={"If-None-Match": '"v1"'})
                        rtt.append(time.perf_counter() - start)
                        assert got.status_code == 304
                        if i == 19:  # warm-up rounds are not counted
                            with_check, without, rtt, verified = [], [], [], 0
                a, b, r = summary_ms(with_check), summary_ms(without), summary_ms(rtt)
                machine = f"{platform.machine()} cpus={len(os.sched_getaffinity(0))} python={platform.python_version()}"
                return {
                    "date": datetime.now(UTC).isoformat(timespec="seconds"),
                    "machine": machine,
                    "memories per owner": len(texts),
                    "source delay ms": args.delay_ms,
                    "rounds": len(with_check),
                    "k (hits checked per read)": args.k,
                    "search with read-time revalidation": a,
                    "search without": b,
                    "one source round trip (direct)": r,
                    "added p50 ms": round(a["p50"] - b["p50"], 2),
                    "added p50 / source round trip p50": round((a["p50"] - b["p50"]) / r["p50"], 2),
                    "hits verified": verified,
                }
    finally:
        stop.set()
        child.join(10)


def markdown(result: dict[str, Any]) -> str:
    """The run as docs/benchmarks.md shows it: the search with and without checks, beside one round trip."""
    a, b = result["search with read-time revalidation"], result["search without"]
    r = result["one source round trip (direct)"]
    k = result["k (hits checked per read)"]
    table = report.table(
        [
            "checks per read",
            "search p50 / p95 with checks",
            "without",
            "added p50",
            "one source round trip p50",
            "added / round trip",
        ],
        [
            [
                f"k={k}" + (", in parallel" if k > 1 else ""),
                f"{a['p50']} / {a['p95']} ms",
                f"{b['p50']} / {b['p95']} ms",
                f"{result['added p50 ms']} ms",
                f"{r['p50']} ms",
                f"{result['added p50 / source round trip p50']}x",
            ]
        ],
    )
    return (
        f"{table}\n\n{result['rounds']} alternating searches after 20 warm-up rounds; "
        f"{result['memories per owner']:,} memories per owner; the source answers 304 after "
        f"{result['source delay ms']} ms; {result['hits verified']} hits verified."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--k", type=int, default=5, help="results per search; each is checked at the source")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    args = parser.parse_args()
    result = asyncio.run(main_async(args))
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    if args.publish:
        report.publish(f"revalidate_bench-k{args.k}", markdown(result))


if __name__ == "__main__":
    main()
