"""The in-process peers at scale: one owner's search as one store grows to 10k, 100k and 1M memories.

    nice -n 10 .venv/bin/python -m bench.peers_scale --data PATH/locomo10.json [--sizes 10000 100000 1000000]
        [--systems langgraph-memory langgraph-qdrant mem0-qdrant mem0-faiss faiss-flat] [--conversation 7]
        [--per-owner 1000] [--questions 100] [--max-load-minutes 5] [--out FILE] [--publish]

Needs the peers' extra (`pip install -e '.[peers]'`, as bench/peers.py). The workload is bench/scale.py's,
so the rows sit beside memwarden's in "Search at scale":
- the measured owner's memories are the turns of one LoCoMo conversation (`--conversation`, default 7, held
  out from the ranking's tuning), "speaker: text [image: caption]", embedded for real, and its category 1-4
  questions are asked (k=5, one after another, after `WARMUP` untimed ones);
- the systems: bench/peer_systems.py's, and an exact FAISS index used directly (`faiss-flat`), the
  in-process exact index issue 26 compares at 1M, where mem0's FAISS store cannot be loaded;
- every other memory is synthetic (bench/synthetic.py's sentence pool, each text tagged "(note n)"), owners
  of `--per-owner` memories each, added through the peer's own `add` (the library's whole write path: its
  ids, payloads, vector store and, for mem0, its history database), size after size, in one store.

Embedding is not what a peer's load is measured for: every system here embeds with the same model, and
memwarden's bulk in bench/scale.py is loaded past its embedder too. So a synthetic text's vector is its pool
sentence's real vector plus the small per-memory noise bench/synthetic.py gives memwarden's bulk
(`PoolEmbeddings`); the owner's turns and the questions go through the model.

At each size: the step's load rate (memories/s through `add`), this process's resident memory (one peer
per process: each runs in a child of its own), search p50 / p95 and R@5 of the owner's questions. A step
whose load, at the rate over its first `CHUNK` memories, would take longer than `--max-load-minutes` is not
loaded (nor any larger size): the row gives that rate and the time the step would take. The data file is
read from where `--data` says and never copied into the project.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings

from bench import report
from bench.locomo import DEFAULT_DATA, Question, evidence_ids, load_corpus, recall
from bench.scale import memory_mb, owner_data
from bench.stack import python_speed_ms, summary_ms
from bench.synthetic import sentence_pool

SYSTEMS = ("langgraph-memory", "langgraph-qdrant", "mem0-qdrant", "mem0-faiss", "faiss-flat")
CHUNK = 2_000
"""Memories per load chunk; the first chunk of a step sets the rate its projection uses."""
WARMUP = 10
K = 5
NOISE = 0.02
"""The per-memory noise on a pool vector: bench/synthetic.py's, so both benches load alike."""
SYNTHETIC = re.compile(r"^(?P<pool>.+) \(note (?P<n>\d+)\)$")


def synthetic_text(pool: Sequence[str], n: int) -> str:
    """The n-th bulk memory's text, as bench/synthetic.py writes memwarden's."""
    return f"{pool[n % len(pool)]} (note {n})"


class PoolEmbeddings(Embeddings):
    """Vectors for the bulk from the pool's real ones (plus per-memory noise); anything else through `embed`.

    `embed` is the real model's batch call; `pool` its sentences, embedded once. A text is recognised as
    bulk only when it is exactly a pool sentence tagged "(note n)", so no question or owner turn is ever
    given a synthetic vector."""

    def __init__(self, embed: Callable[[list[str]], list[list[float]]], pool: Sequence[str]) -> None:
        self._embed = embed
        self._index = {s: i for i, s in enumerate(pool)}
        self._vectors = np.asarray(embed(list(pool)), dtype=np.float32)

    def vector(self, text: str) -> list[float] | None:
        """The bulk vector for `text`, or None when it is not a bulk text."""
        m = SYNTHETIC.match(text)
        if m is None or m["pool"] not in self._index:
            return None
        n = int(m["n"])
        noise = np.random.default_rng(n).normal(0.0, NOISE, self._vectors.shape[1])
        v = self._vectors[self._index[m["pool"]]] + noise
        return (v / np.linalg.norm(v)).astype(np.float32).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        found = [self.vector(t) for t in texts]
        missing = [t for t, v in zip(texts, found, strict=True) if v is None]
        real = iter(self._embed(missing) if missing else [])
        return [v if v is not None else next(real) for v in found]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def projected_s(done: int, elapsed: float, total: int) -> float:
    """Seconds for `total` memories at the rate of the first `done` (`elapsed` seconds)."""
    return elapsed / done * total


def plan(sizes: Sequence[int], owner_turns: int) -> list[int]:
    """The bulk's size at each step (a size counts the owner's memories too); sizes too small are refused."""
    steps = []
    for size in sorted(sizes):
        if size <= owner_turns:
            raise ValueError(f"size {size} does not exceed the owner's {owner_turns} memories")
        steps.append(size - owner_turns)
    return steps


def search_figures(
    search: Callable[[str], list[str]], questions: Sequence[Question], mapping: dict[tuple[int, str], str]
) -> dict[str, Any]:
    """Each question once after `WARMUP` untimed ones: latency p50/p95 (ms) and R@5."""
    for q in questions[:WARMUP]:
        search(q.text)
    took: list[float] = []
    recalls: list[float] = []
    for q in questions:
        start = time.perf_counter()
        ranked = search(q.text)
        took.append(time.perf_counter() - start)
        recalls.append(recall(ranked, evidence_ids(mapping, q), K))
    return {"search": summary_ms(took), "R@5": round(sum(recalls) / len(recalls), 3), "questions": len(questions)}


def run_one(args: argparse.Namespace) -> dict[str, Any]:
    """One peer, every size, in this process."""
    from bench.peer_systems import BUILDERS  # the peers' extra: imported only where a peer runs
    from memwarden.embed import default_embedder

    data = owner_data(load_corpus(args.data), args.conversation)
    questions = data.questions[: args.questions] if args.questions else data.questions
    pool = sentence_pool(random.Random(7))
    embeddings = PoolEmbeddings(default_embedder().embed, pool)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="memwarden-peers-scale-") as tmp:
        peer = BUILDERS[args.one](embeddings, Path(tmp))  # type: ignore[arg-type]
        try:
            owner = f"locomo-owner-{args.conversation}"
            mapping: dict[tuple[int, str], str] = {}
            start = time.perf_counter()
            for t in data.turns:
                mapping[(t.conv, t.dia_id)] = peer.add(owner, t.dia_id, t.content, {"session": t.session})
            owner_s = time.perf_counter() - start
            loaded = 0
            for size, bulk in zip(sorted(args.sizes), plan(args.sizes, len(data.turns)), strict=True):
                row: dict[str, Any] = {"size": size}
                step_from, step_start, checked = loaded, time.perf_counter(), False
                while loaded < bulk:
                    hi = min(loaded + CHUNK, bulk)
                    for n in range(loaded, hi):
                        peer.add(f"owner-{n // args.per_owner}", f"m{n}", synthetic_text(pool, n), {})
                    loaded = hi
                    if not checked and loaded < bulk:
                        checked = True
                        elapsed = time.perf_counter() - step_start
                        expected = projected_s(loaded - step_from, elapsed, bulk - step_from)
                        row["projected_step_s"] = round(expected, 1)
                        if args.max_load_minutes and expected > args.max_load_minutes * 60:
                            row |= {
                                "loaded": False,
                                "bulk": loaded,
                                "rate_per_s": round((loaded - step_from) / elapsed, 1),
                            }
                            break
                if row.get("loaded") is False:
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    break
                elapsed = time.perf_counter() - step_start
                row |= {
                    "loaded": True,
                    "bulk": bulk,
                    "rate_per_s": round((bulk - step_from) / elapsed, 1),
                    "rss_mb": memory_mb(os.getpid()),
                    **search_figures(lambda q: peer.search(owner, q, K), questions, mapping),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
        finally:
            peer.close()
    return {
        "system": peer.name,
        "notes": peer.notes,
        "owner_turns": len(data.turns),
        "owner_load_s": owner_s,
        "rows": rows,
    }


def main_all(args: argparse.Namespace) -> dict[str, Any]:
    """Every peer in a child process of its own (so one's memory is not the next one's), one after another."""
    runs: dict[str, Any] = {}
    for name in args.systems:
        with tempfile.NamedTemporaryFile(suffix=".json") as out:
            cmd = [sys.executable, "-m", "bench.peers_scale", "--one", name, "--child-out", out.name]
            cmd += ["--data", str(args.data), "--conversation", str(args.conversation)]
            cmd += ["--per-owner", str(args.per_owner), "--questions", str(args.questions)]
            cmd += ["--max-load-minutes", str(args.max_load_minutes), "--sizes", *map(str, args.sizes)]
            print(f"{name}: started", flush=True)
            subprocess.run(cmd, check=True)
            runs[name] = json.loads(Path(out.name).read_text())
    return {"python_loop_ms": python_speed_ms(), "conversation": args.conversation, "runs": runs}


def duration(seconds: float) -> str:
    """A projected load time as a reader wants it: minutes under an hour, hours beyond."""
    return f"{seconds / 60:.0f} min" if seconds < 3600 else f"{seconds / 3600:.1f} h"


def markdown(result: dict[str, Any]) -> str:
    """One row per system and size; a size not loaded says at what rate and how long it would have taken."""
    rows = []
    for run in result["runs"].values():
        for r in run["rows"]:
            if r["loaded"]:
                s = r["search"]
                rows.append(
                    [
                        run["system"],
                        f"{r['size']:,}",
                        f"{r['rate_per_s']:,}",
                        r["rss_mb"],
                        f"{s['p50']} / {s['p95']}",
                        r["R@5"],
                    ]
                )
            else:
                rows.append(
                    [
                        run["system"],
                        f"{r['size']:,}",
                        f"{r['rate_per_s']:,} (not loaded: the step would take {duration(r['projected_step_s'])})",
                        "",
                        "",
                        "",
                    ]
                )
    table = report.table(
        ["system", "memories", "load memories/s", "RSS MB", "search p50 / p95 ms", "R@5 owner's questions"], rows
    )
    notes = [
        f"LoCoMo conversation {result['conversation']} is the measured owner; the other owners hold synthetic "
        f"memories added through each library's own `add`; k={K}; python_loop_ms {result['python_loop_ms']}."
    ]
    for run in result["runs"].values():
        if run["notes"]:
            notes.append(f"{run['system']}: " + "; ".join(run["notes"]) + ".")
    return "\n\n".join([table, " ".join(notes)])


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo's locomo10.json")
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    p.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    p.add_argument("--conversation", type=int, default=7)
    p.add_argument("--per-owner", type=int, default=1000)
    p.add_argument("--questions", type=int, default=100, help="the owner's questions asked per size (0: all)")
    p.add_argument("--max-load-minutes", type=float, default=5.0)
    p.add_argument("--out", type=Path, default=None, help="also write the JSON result here")
    p.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    p.add_argument("--one", choices=SYSTEMS, help=argparse.SUPPRESS)
    p.add_argument("--child-out", type=Path, help=argparse.SUPPRESS)
    return p


def main() -> None:
    args = parser().parse_args()
    if args.one:
        Path(args.child_out).write_text(json.dumps(run_one(args)))
        return
    result = main_all(args)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    print(markdown(result))
    if args.publish:
        report.publish("peers_scale", markdown(result))


if __name__ == "__main__":
    main()
