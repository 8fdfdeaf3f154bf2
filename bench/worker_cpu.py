"""CPU cost of what every Remember commit and every Retrieve does on a worker: one embedding
(MiniLM int8 on onnxruntime) and one BM25 sparse vector (`qdrant_edge.Bm25`), per text.

    nice -n 10 .venv/bin/python -m bench.worker_cpu [--n 300] [--publish]

Why: these two are the worker's CPU-bound steps (everything else waits on Temporal, PostgreSQL,
Qdrant or Redis), so they bound how many writes and searches one worker core can serve, and how fast
a worker re-embeds the store when the embedder changes. The texts are short memory-like sentences,
built here (no data set needed). Beside the service's embedder (the file's int8 weights multiplied in
int8, one text per run), the same file as onnxruntime runs it by itself (its weights dequantized to
fp32 at load and multiplied in fp32), one text per run and in padded batches of 16, and how close the
service's vectors are to those (cosine): what docs/decisions/int8-embedding-kernels.md weighs.
"""

from __future__ import annotations

import argparse
import statistics
import time
from importlib import resources

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from bench import report as published
from memwarden import embed
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


class Fp32Products:
    """The pinned model file run by onnxruntime alone: int8 weights dequantized at load, fp32 products."""

    def __init__(self) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        model = resources.files(embed.MODEL_PACKAGE).joinpath(embed.MODEL_FILE).read_bytes()
        self.session = ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
        self.tokenizer = Tokenizer.from_str(resources.files("memwarden").joinpath("data", "tokenizer.json").read_text())
        self.tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # to the longest in each batch
        self.tokenizer.enable_truncation(max_length=embed.MAX_TOKENS)

    def embed(self, texts: list[str]) -> list[list[float]]:
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        (hidden,) = self.session.run(["last_hidden_state"], feed)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / weights.sum(axis=1)
        return (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)).tolist()


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
    fp32 = Fp32Products()
    sample = texts(args.n)
    embedder.embed(sample[:16])  # warm-up: session creation and first-run allocations
    fp32.embed(sample[:16])
    lines = ["| step | texts | p50 ms per call | p95 ms per call | texts/s |", "|---|---|---|---|---|"]
    print("\n".join(lines))
    batches = [sample[i : i + 16] for i in range(0, len(sample), 16)]
    for _ in range(2):  # the service's and fp32 interleaved in two rounds; the second is reported
        service = per_call_ms(lambda t: embedder.embed([t]), sample)
        alone = per_call_ms(lambda t: fp32.embed([t]), sample)
        batched = per_call_ms(fp32.embed, batches)
    lines.append(report("embed: int8 products, one text per run (the service's)", service))
    lines.append(report("embed: fp32 products, one text per run", alone))
    lines.append(report("embed: fp32 products, padded batches of 16", batched, per_call=16))
    lines.append(report("BM25 document vector", per_call_ms(bm25_document, sample)))
    cosines = np.sum(np.asarray(embedder.embed(sample)) * np.asarray(fp32.embed(sample)), axis=1)
    closeness = (
        f"The service's vectors against the fp32 products' for the same {len(sample)} texts: cosine "
        f"min {cosines.min():.5f}, mean {cosines.mean():.5f}."
    )
    print(closeness)
    lines += ["", closeness]
    if args.publish:
        published.publish("worker_cpu", "\n".join(lines))


if __name__ == "__main__":
    main()
