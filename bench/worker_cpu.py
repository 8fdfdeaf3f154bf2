"""CPU cost of what every Remember commit and every Retrieve does on a worker: one embedding
(MiniLM int8 on onnxruntime) and one BM25 sparse vector (`qdrant_edge.Bm25`), per text.

    nice -n 10 .venv/bin/python -m bench.worker_cpu [--n 300] [--publish]

Why: these two are the worker's CPU-bound steps (everything else waits on Temporal, PostgreSQL,
Qdrant or Redis), so they bound how many writes and searches one worker core can serve. The texts
are short memory-like sentences, built here (no data set needed). Batch 1 is what the activities do
(one text per call); batch 16 shows what batching would buy.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench import report as published
from memwarden.embed import default_embedder
from memwarden.stores.vectors import bm25_document

SUBJECTS = ["Alice", "Bob", "the customer", "Priya", "the user", "Marco"]
FACTS = [
    "prefers aisle seats on short flights",
    "is allergic to peanuts and avoids shared fryers",
    "wants invoices sent as PDF at the end of each month",
    "moved from Lisbon to Porto in March and works remotely",
    "asked to be called by her first name in every reply",
    "keeps a vegetarian diet but eats fish on weekends",
    "uses the staging cluster for load tests before releases",
    "likes concise answers with a short summary at the top",
]


def texts(n: int) -> list[str]:
    return [f"{SUBJECTS[i % len(SUBJECTS)]} {FACTS[i % len(FACTS)]} (note {i})" for i in range(n)]


def per_call_ms(fn: object, items: list[object]) -> list[float]:
    out: list[float] = []
    for item in items:
        began = time.perf_counter()
        fn(item)  # type: ignore[operator]
        out.append((time.perf_counter() - began) * 1000)
    return out


def report(name: str, ms: list[float], per_call: int = 1) -> str:
    """One table row, printed and returned."""
    ms_sorted = sorted(ms)
    p50 = statistics.median(ms_sorted)
    p95 = ms_sorted[int(0.95 * (len(ms_sorted) - 1))]
    rate = per_call * len(ms) / (sum(ms) / 1000)
    line = f"| {name} | {len(ms) * per_call} | {p50:.3f} | {p95:.3f} | {rate:,.0f} |"
    print(line)
    return line


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    args = parser.parse_args()
    embedder = default_embedder()
    sample = texts(args.n)
    embedder.embed(sample[:16])  # warm-up: session creation and first-run allocations
    lines = ["| step | texts | p50 ms per call | p95 ms per call | texts/s |", "|---|---|---|---|---|"]
    print("\n".join(lines))
    lines.append(report("embed, batch 1", per_call_ms(lambda t: embedder.embed([t]), sample)))
    batches = [sample[i : i + 16] for i in range(0, len(sample), 16)]
    lines.append(report("embed, batch 16", per_call_ms(embedder.embed, batches), per_call=16))
    lines.append(report("BM25 document vector", per_call_ms(bm25_document, sample)))
    if args.publish:
        published.publish("worker_cpu", "\n".join(lines))


if __name__ == "__main__":
    main()
