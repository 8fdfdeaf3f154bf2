"""memwarden beside LangGraph's stores and mem0, on the same LoCoMo turns, questions and embedder, in one run.

    nice -n 10 .venv/bin/python -m bench.peers --data PATH/locomo10.json [--sizes 2000 5000] [--questions 200]
        [--out FILE] [--plots docs/img] [--publish]

Needs the bench's own extra: `pip install -e '.[peers]'` (docs/decisions/peers-benchmark.md says what each
peer is). The systems:
- memwarden over HTTP as a user runs it: `memwarden up` in a process of its own (the embedded profile:
  Temporal dev server, worker and API; a workflow per operation), tokens minted by `memwarden token`;
  writes through `POST /v1/memories` as the owner (the whole gate; a PENDING write is confirmed by the
  owner, as bench/locomo.py does), searches through `POST /v1/search` as an agent serving the owner. Not
  in this process, where it and the peers would share one interpreter lock and garbage collector
  (measured at N=2,000 beside two peers: memwarden's search p50 52.6 ms in this process, 45.4 ms in its
  own; LangGraph InMemoryStore's 33.0 ms beside it in this process, 25.5 ms with it outside);
- in this process (bench/peer_systems.py): LangGraph's InMemoryStore, LangGraph's QdrantStore
  (langgraph-store-qdrant on Qdrant's local mode), mem0 on Qdrant local and on FAISS (`infer=False`,
  no LLM). All embed with memwarden's own model (all-MiniLM-L6-v2 int8).
- mem0's REST server is probed, not run, when it cannot run here: the reasons are measured and reported.

The workload, per size N (each size on fresh systems): the first N LoCoMo turns, conversation after
conversation, each session in order, all as memories of ONE owner ("speaker: text [image: caption]");
`--questions` category 1-4 questions whose evidence lies within those turns; k=5.

Measured per system, the phases interleaved across systems (turn by turn, question by question, the
order rotating) so the machine's load falls on all alike:
- add p50/p95 (one add after another) and ingest time (their sum); memwarden's is the `POST` alone;
- search p50/p95 and R@5 = |evidence in top 5| / |evidence|, averaged over the questions;
- how long until a new memory is searchable: from the add's start until a search for its text returns
  it (searching back to back), p50 over `--fresh` tries;
- CPU ms per add and per search, from /proc (bench.stack.cpu_by_part) over a batch of `--cpu-ops` of
  each, one system at a time: for memwarden its process and the Temporal dev server under it (the bench's
  HTTP client is not counted), for a peer this process;
- searches/s and writes/s at each of `--clients` concurrent clients: for memwarden, clients in a process
  of their own (bench/load_clients.py), as agent backends are; for the in-process peers, threads in
  this process calling the library's synchronous API (what mem0's AsyncMemory does too).
The peers' calls run on this process's event loop thread.

The data file is read from where `--data` says and never copied into the project.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.metadata
import json
import logging
import os
import random
import re
import shutil
import subprocess
import tempfile
import textwrap
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import httpx

from bench import load_clients, report
from bench.locomo import (
    CONFIRMED,
    DEFAULT_DATA,
    Corpus,
    Question,
    Turn,
    evidence_ids,
    load_corpus,
    post_memory,
    recall,
    settle,
    turn_body,
)
from bench.stack import compile_project, cpu_by_part, per_op_ms, python_speed_ms, rounded, summary_ms
from tests.e2e import harness
from worker import event_loop

K = 5
TENANT = "peers"
OWNER = "peers-owner"
MEMWARDEN = "memwarden"
PEERS = ("langgraph-memory", "langgraph-qdrant", "mem0-qdrant", "mem0-faiss")
SYSTEMS = (MEMWARDEN, *PEERS)
FRESH_TIMEOUT_S = 30.0
DOC_IMG = report.DOC.parent / "img"


# --- the workload: pure, tested in tests/unit/test_bench_peers.py ---


def session_number(session: str) -> int:
    """A session's number, "session_12" -> 12: sessions in the order they happened, where names sort
    "session_10" before "session_2"."""
    found = re.search(r"(\d+)$", session)
    return int(found.group(1)) if found else 0


def owner_turns(corpus: Corpus, n: int) -> list[Turn]:
    """The first n turns: conversation after conversation, sessions in order, turns in order within each."""
    ordered = sorted(corpus.turns, key=lambda t: (t.conv, session_number(t.session)))  # stable: turn order kept
    return ordered[:n]


def select_questions(corpus: Corpus, turns: Sequence[Turn], count: int, seed: int) -> list[Question]:
    """`count` of the questions all of whose evidence lies within `turns`, drawn with `seed` and kept in the
    data's order: a sample across every conversation loaded, not only the first one's questions."""
    loaded = {(t.conv, t.dia_id) for t in turns}
    eligible = [q for q in corpus.questions if all((q.conv, e) in loaded for e in q.evidence)]
    if len(eligible) <= count:
        return eligible
    chosen = set(random.Random(seed).sample(range(len(eligible)), count))
    return [q for i, q in enumerate(eligible) if i in chosen]


def rotation(names: Sequence[str], i: int) -> list[str]:
    """The systems' order for round i: each goes first in turn, so none is always measured right after
    the same neighbour (whose garbage, caches or threads it would inherit)."""
    if not names:
        return []
    shift = i % len(names)
    return [*names[shift:], *names[:shift]]


def per_client(total: int, clients: int) -> int:
    """Requests per client so that `clients` clients make about `total` in all (at least one each)."""
    return max(1, round(total / clients))


def mean_recall(ranked: Sequence[list[str]], evidence: Sequence[set[str]], k: int = K) -> float:
    """R@k averaged over questions (0 for none)."""
    if not ranked:
        return 0.0
    return round(sum(recall(r, e, k) for r, e in zip(ranked, evidence, strict=True)) / len(ranked), 3)


def load_texts(seed: int, clients: int, count: int) -> list[list[str]]:
    """Each concurrent writer's synthetic texts (bench/load_clients.py's), the same for every system."""
    rng = random.Random(seed)
    return [[load_clients.text(rng, f"person {i}") for _ in range(count)] for i in range(clients)]


@dataclass(frozen=True)
class Entry:
    """One memory to write: a LoCoMo turn (its provenance beside it) or a synthetic text (`turn` None)."""

    owner: str
    key: str
    text: str
    meta: dict[str, str] = field(default_factory=dict)
    turn: Turn | None = None


def turn_entry(t: Turn) -> Entry:
    """A LoCoMo turn as the one owner's memory. Conversations share session names ("session_1"), so the
    session is named with its conversation: one owner, many distinct sessions."""
    session = f"conv{t.conv}/{t.session}"
    return Entry(
        OWNER, f"c{t.conv}-{t.dia_id}", t.content, {"session": session, "turn": t.dia_id, "speaker": t.speaker}, t
    )


def synthetic_entry(owner: str, text: str) -> Entry:
    return Entry(owner, str(uuid.uuid4()), text)


# --- the systems ---


class System(Protocol):
    key: str
    label: str
    notes: list[str]

    async def add(self, entry: Entry) -> tuple[str | None, float]:
        """Write one memory: its id (None when it was not stored) and the write's seconds."""
        ...

    async def search(self, owner: str, query: str) -> tuple[list[str], float]:
        """The owner's top K ids for the query, and the search's seconds."""
        ...

    async def concurrent(self, op: str, work: list[list[str]]) -> tuple[float, int]:
        """len(work) clients at once, client i writing (op "write") or asking (op "search") work[i] in
        turn: wall seconds and failed requests."""
        ...

    def cpu(self) -> Counter[str]:
        """CPU seconds so far of what runs this system, by part (bench.stack.cpu_by_part)."""
        ...


@dataclass
class Service:
    """`memwarden up` running as a child of this process, and an HTTP client to its API."""

    up: harness.Stack
    http: httpx.AsyncClient

    @property
    def pid(self) -> int:
        assert self.up.proc is not None
        return self.up.proc.pid

    def token(self, *, sub: str, role: str, agent: str | None = None, on_behalf_of: str | None = None) -> str:
        """`memwarden token` against the service's data dir, as an operator mints one."""
        extra = [*(["--agent", agent] if agent else []), *(["--on-behalf-of", on_behalf_of] if on_behalf_of else [])]
        args = ["--tenant", TENANT, "--sub", sub, "--role", role, "--ttl", str(24 * 3600), *extra]
        return harness.mint(self.up.data_dir, *args, cwd=self.up.cwd)


def _start_service(where: Path) -> harness.Stack:
    compile_project()  # as `make install` does: the service runs from bytecode
    where.mkdir(parents=True, exist_ok=True)
    up = harness.Stack(data_dir=where / "data", cwd=where)
    up.start()
    return up


@contextlib.asynccontextmanager
async def memwarden_service(where: Path) -> AsyncIterator[Service]:
    """Start `memwarden up` (its own data dir and ports) and wait until it is ready; stop it on exit."""
    up = await asyncio.to_thread(_start_service, where)
    try:
        await asyncio.to_thread(up.wait_ready)
        async with httpx.AsyncClient(base_url=up.base_url, timeout=60) as http:
            yield Service(up=up, http=http)
    finally:
        if up.proc is not None and up.proc.poll() is None:  # exited already (not ready): nothing to interrupt
            try:
                await asyncio.to_thread(up.interrupt)
            except AssertionError:
                pass  # did not stop in time: killed below
        up.kill()


class Memwarden:
    """memwarden over HTTP (`memwarden up`, its own process): the owner writes, an agent serving the owner searches."""

    key = MEMWARDEN
    label = "memwarden (HTTP, a workflow per operation)"

    def __init__(self, service: Service) -> None:
        self.service = service
        self.decisions: Counter[str] = Counter()
        self.notes: list[str] = []
        self._users: dict[str, str] = {}
        self._agents: dict[str, str] = {}
        self._rng = random.Random(3)

    def user(self, owner: str) -> str:
        if owner not in self._users:
            self._users[owner] = self.service.token(sub=owner, role="user")
        return self._users[owner]

    def agent(self, owner: str) -> str:
        if owner not in self._agents:
            self._agents[owner] = self.service.token(
                sub=f"svc-{owner}", role="agent", agent="peers-agent", on_behalf_of=owner
            )
        return self._agents[owner]

    def body(self, entry: Entry) -> dict[str, Any]:
        if entry.turn is not None:
            return turn_body(entry.turn, session=entry.meta["session"])
        return {**load_clients.body(self._rng, entry.owner), "content": entry.text}

    async def add(self, entry: Entry) -> tuple[str | None, float]:
        token = self.user(entry.owner)
        start = time.perf_counter()
        answer = await post_memory(self.service.http, self.body(entry), token)
        elapsed = time.perf_counter() - start
        return await settle(self.service.http, answer, token, self.decisions), elapsed

    async def search(self, owner: str, query: str) -> tuple[list[str], float]:
        headers = {"Authorization": f"Bearer {self.agent(owner)}"}
        start = time.perf_counter()
        answer = await self.service.http.post("/v1/search", json={"query": query, "k": K}, headers=headers)
        elapsed = time.perf_counter() - start
        answer.raise_for_status()
        return [r["memory_id"] for r in answer.json()["results"]], elapsed

    async def concurrent(self, op: str, work: list[list[str]]) -> tuple[float, int]:
        clients = []
        for i, items in enumerate(work):
            who = OWNER if op == "search" else load_owner(i)
            token = self.agent(who) if op == "search" else self.user(who)
            spec: dict[str, Any] = {"headers": {"Authorization": f"Bearer {token}"}, "who": who}
            spec["queries" if op == "search" else "texts"] = items
            clients.append(spec)
        job = {
            "base_url": self.service.up.base_url,
            "clients": clients,
            "per_client": len(work[0]),
            "seed": 5,
            "op": op,
            "k": K,
        }
        done, _, _ = await load_clients.run_elsewhere(job, lambda: None)
        return done["elapsed_s"], done["failed"]

    def cpu(self) -> Counter[str]:
        return cpu_by_part(self.service.pid)  # the service's process and the dev server it started


class InProcess:
    """A library peer (bench/peer_systems.py) behind the bench's async calls. Its calls run right here, on
    the event loop's thread: blocking it keeps memwarden's Python quiet while a peer is measured."""

    def __init__(self, key: str, peer: Any) -> None:
        self.key = key
        self.peer = peer
        self.label = peer.name
        self.notes: list[str] = peer.notes
        self.warnings: Counter[str] = Counter()
        """What the library logged at WARNING or above under concurrent clients (a call can succeed and
        still lose work: mem0's FAISS store logs a failed save and carries on)."""
        self.errors: Counter[str] = Counter()
        """The calls that raised under concurrent clients, by exception."""

    async def add(self, entry: Entry) -> tuple[str | None, float]:
        start = time.perf_counter()
        memory_id = self.peer.add(entry.owner, entry.key, entry.text, entry.meta)
        return memory_id, time.perf_counter() - start

    async def search(self, owner: str, query: str) -> tuple[list[str], float]:
        start = time.perf_counter()
        ids = self.peer.search(owner, query, K)
        return ids, time.perf_counter() - start

    async def concurrent(self, op: str, work: list[list[str]]) -> tuple[float, int]:
        from bench.peer_systems import run_threads

        def call(i: int, n: int) -> object:
            if op == "search":
                return self.peer.search(OWNER, work[i][n], K)
            return self.peer.add(load_owner(i), str(uuid.uuid4()), work[i][n], {})

        with logged_warnings() as logged:
            elapsed, errors = run_threads(len(work), len(work[0]), call)
        what = f"{'searches' if op == 'search' else 'writes'} at {len(work)} clients"
        for message, count in logged.items():
            self.warnings[f"{what}: {message}"] += count
        for message, count in errors.items():
            self.errors[f"{what}: {message}"] += count
        return elapsed, sum(errors.values())

    def cpu(self) -> Counter[str]:
        # The peer and its threads are in this process; the children (memwarden, writers) are not its.
        return Counter({part: s for part, s in cpu_by_part().items() if part not in ("dev server", "writers")})


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.seen: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        self.seen[record.getMessage().splitlines()[0][:160]] += 1


@contextlib.contextmanager
def logged_warnings() -> Iterator[Counter[str]]:
    """Warnings any logger emits meanwhile, by their first line, counted."""
    handler = _Collect()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler.seen
    finally:
        root.removeHandler(handler)


def load_owner(i: int) -> str:
    """Concurrent writers write as owners of their own, so the measured owner's memories stay the turns."""
    return f"peers-load-{i}"


# --- the phases ---


def in_turn(systems: Sequence[System], i: int) -> list[System]:
    by_key = {s.key: s for s in systems}
    return [by_key[key] for key in rotation([s.key for s in systems], i)]


async def warm_up(systems: Sequence[System], questions: Sequence[Question]) -> None:
    """A few writes (as another owner) and searches each: model sessions, connection pools and the
    workflow sandbox warm before the clock counts."""
    rng = random.Random(1)
    for i in range(5):
        for s in in_turn(systems, i):
            await s.add(synthetic_entry("peers-warmup", load_clients.text(rng, "someone")))
            await s.search(OWNER, questions[i % len(questions)].text if questions else "warm up")


Mapping = dict[str, dict[tuple[int, str], str]]
"""Per system: (conversation, turn id) -> the id that system gave the turn's memory."""


async def ingest(systems: Sequence[System], turns: Sequence[Turn]) -> tuple[Mapping, dict[str, list[float]]]:
    """Every turn into every system, one add at a time, turn by turn: turn -> id maps and add latencies."""
    mapping: Mapping = {s.key: {} for s in systems}
    latencies: dict[str, list[float]] = {s.key: [] for s in systems}
    started = time.monotonic()
    for i, t in enumerate(turns):
        entry = turn_entry(t)
        for s in in_turn(systems, i):
            memory_id, elapsed = await s.add(entry)
            latencies[s.key].append(elapsed)
            if memory_id is not None:
                mapping[s.key][(t.conv, t.dia_id)] = memory_id
        if (i + 1) % 500 == 0:
            print(f"  added {i + 1}/{len(turns)} turns to each system in {time.monotonic() - started:.0f}s", flush=True)
    return mapping, latencies


async def ask(systems: Sequence[System], questions: Sequence[Question], mapping: Mapping) -> dict[str, dict[str, Any]]:
    """Every question of every system, question by question: search latencies and R@5."""
    ranked: dict[str, list[list[str]]] = {s.key: [] for s in systems}
    latencies: dict[str, list[float]] = {s.key: [] for s in systems}
    for i, q in enumerate(questions):
        for s in in_turn(systems, i):
            ids, elapsed = await s.search(OWNER, q.text)
            ranked[s.key].append(ids)
            latencies[s.key].append(elapsed)
    return {
        s.key: {
            "search_ms": summary_ms(latencies[s.key]),
            "recall@5": mean_recall(ranked[s.key], [evidence_ids(mapping[s.key], q) for q in questions]),
        }
        for s in systems
    }


async def searchable_after(systems: Sequence[System], tries: int, seed: int) -> dict[str, dict[str, Any]]:
    """Per system: seconds from a new memory's add until a search for its text returns it (p50 over tries)."""
    rng = random.Random(seed)
    times: dict[str, list[float]] = {s.key: [] for s in systems}
    missed: Counter[str] = Counter()
    for i in range(tries):
        text = f"synthetic: fresh note {uuid.uuid4().hex[:10]}: {load_clients.text(rng, 'the owner')}"
        for s in in_turn(systems, i):
            start = time.perf_counter()
            memory_id, _ = await s.add(synthetic_entry(OWNER, text))
            found = False
            while memory_id is not None and time.perf_counter() - start < FRESH_TIMEOUT_S:
                ids, _ = await s.search(OWNER, text)
                if memory_id in ids:
                    found = True
                    break
            if found:
                times[s.key].append(time.perf_counter() - start)
            else:
                missed[s.key] += 1
    return {
        s.key: {"p50_ms": summary_ms(times[s.key])["p50"] if times[s.key] else None, "missed": missed[s.key]}
        for s in systems
    }


async def cpu_per_op(s: System, ops: int, questions: Sequence[Question], seed: int) -> dict[str, Any]:
    """CPU ms per add and per search of one system, each over a batch of `ops` between two /proc readings."""
    rng = random.Random(seed)
    texts = [load_clients.text(rng, "the owner") for _ in range(ops)]
    before = s.cpu()
    for text in texts:
        await s.add(synthetic_entry("peers-cpu", text))
    adds = per_op_ms(before, s.cpu(), ops)
    before = s.cpu()
    for i in range(ops):
        await s.search(OWNER, questions[i % len(questions)].text)
    searches = per_op_ms(before, s.cpu(), ops)
    return {
        "cpu_ms_per_add": round(sum(adds.values()), 1),
        "cpu_ms_per_search": round(sum(searches.values()), 1),
        "cpu_ms_per_add_by_part": rounded(adds),
        "cpu_ms_per_search_by_part": rounded(searches),
    }


async def throughput(
    systems: Sequence[System], levels: Sequence[int], total: int, questions: Sequence[Question], seed: int
) -> dict[str, dict[str, Any]]:
    """Searches/s, then writes/s, with each number of concurrent clients; each level runs every system in
    turn. A rate counts the requests that succeeded; the ones that failed are counted beside it. Searches
    go first: concurrent writes can leave a library's store broken (qdrant-client's local mode does), and
    a search rate is then the store's breakage, not its speed; one search after all the writes says
    whether the store still answers."""
    out: dict[str, dict[str, Any]] = {
        s.key: {"searches_per_s": {}, "writes_per_s": {}, "requests": {}, "search_failures": {}, "write_failures": {}}
        for s in systems
    }
    texts = [q.text for q in questions]
    for op, rate, failures in (
        ("search", "searches_per_s", "search_failures"),
        ("write", "writes_per_s", "write_failures"),
    ):
        for level, clients in enumerate(levels):
            count = per_client(total, clients)
            if op == "search":
                work = [[texts[(i * count + n) % len(texts)] for n in range(count)] for i in range(clients)]
            else:
                work = load_texts(seed + clients, clients, count)
            for s in in_turn(systems, level):
                elapsed, failed = await s.concurrent(op, work)
                row, at = out[s.key], str(clients)
                row["requests"][at] = clients * count
                row[rate][at] = round((clients * count - failed) / elapsed, 1)
                row[failures][at] = failed
            print(f"  {rate} at {clients} clients: done", flush=True)
    for s in systems:
        try:
            await s.search(OWNER, texts[0])
            out[s.key]["searches_after_concurrent_writes"] = "answered"
        except Exception as error:
            out[s.key]["searches_after_concurrent_writes"] = (
                f"{type(error).__name__}: {str(error).splitlines()[0][:160]}"
            )
    return out


async def run_size(corpus: Corpus, size: int, args: argparse.Namespace, where: Path) -> dict[str, Any]:
    """One size on fresh systems: ingest, questions, freshness, CPU, then concurrency (which writes more)."""
    turns = owner_turns(corpus, size)
    questions = select_questions(corpus, turns, args.questions, seed=size)
    print(f"N={len(turns)}: {len(questions)} questions with their evidence in those turns", flush=True)
    systems: list[System] = []
    async with contextlib.AsyncExitStack() as exits:
        if MEMWARDEN in args.systems:
            service = await exits.enter_async_context(memwarden_service(where / "memwarden"))
            systems.append(Memwarden(service))
        names = [name for name in PEERS if name in args.systems]
        if names:
            from bench import peer_systems

            for name, peer in zip(names, peer_systems.build(names, where), strict=True):
                exits.callback(peer.close)
                systems.append(InProcess(name, peer))
        await warm_up(systems, questions)
        warm = {s.key: dict(s.decisions) for s in systems if isinstance(s, Memwarden)}
        started = time.monotonic()
        mapping, adds = await ingest(systems, turns)
        print(f"  ingested in {time.monotonic() - started:.0f}s", flush=True)
        gate = {s.key: dict(s.decisions) for s in systems if isinstance(s, Memwarden)}
        answers = await ask(systems, questions, mapping)
        fresh = await searchable_after(systems, args.fresh, seed=size)
        cpu = {s.key: await cpu_per_op(s, args.cpu_ops, questions, seed=size) for s in systems}
        load = await throughput(systems, args.clients, args.load_ops, questions, seed=size)
    result: dict[str, Any] = {"turns": len(turns), "questions": len(questions), "systems": {}}
    for s in systems:
        row: dict[str, Any] = {
            "label": s.label,
            "add_ms": summary_ms(adds[s.key]),
            "ingest_s": round(sum(adds[s.key]), 1),
            "stored": len(set(mapping[s.key].values())),
            **answers[s.key],
            "searchable_after": fresh[s.key],
            **cpu[s.key],
            **load[s.key],
            "notes": s.notes,
        }
        if isinstance(s, Memwarden):
            # the warm-up's writes came first: the gate's decisions on the turns are the difference
            row["decisions_on_turns"] = dict(Counter(gate[s.key]) - Counter(warm[s.key]))
        if isinstance(s, InProcess):
            row["warnings"] = dict(s.warnings)
            row["errors"] = dict(s.errors)
        result["systems"][s.key] = row
    return result


# --- mem0's REST server ---


def mem0_server_status() -> list[str]:
    """Why mem0's own REST server does not run here, as measured now (empty: nothing stands in its way, and
    then the bench should grow a client for it)."""
    reasons: list[str] = []
    try:
        version = importlib.metadata.version("mem0ai")
        shipped = [str(f) for f in importlib.metadata.files("mem0ai") or []]
        if not any(path.startswith("server/") for path in shipped):
            reasons.append(
                f"the mem0ai {version} package ships no REST server (it is the mem0 repository's server/ "
                "directory, run with Docker Compose beside PostgreSQL/pgvector)"
            )
    except importlib.metadata.PackageNotFoundError:
        reasons.append("mem0ai is not installed")
    docker = shutil.which("docker")
    if docker is None:
        reasons.append("no docker on PATH")
    else:
        try:
            info = subprocess.run([docker, "info"], capture_output=True, text=True, timeout=30)
            if info.returncode != 0:
                lines = [line.strip() for line in (info.stderr or info.stdout).splitlines() if line.strip()]
                reasons.append(f"`docker info` exits {info.returncode}: {lines[-1] if lines else 'no output'}")
        except subprocess.TimeoutExpired:
            reasons.append("`docker info` did not answer in 30 s")
    if not (os.environ.get("OPENAI_API_KEY") or os.environ.get("GOOGLE_API_KEY")):
        reasons.append(
            "no OPENAI_API_KEY or GOOGLE_API_KEY: the server embeds only through OpenAI's or Gemini's API "
            "(no local embedder, so it could not share memwarden's either)"
        )
    return reasons


# --- the run ---


def versions() -> dict[str, str]:
    out = {}
    for name in ("mem0ai", "langgraph", "langgraph-store-qdrant", "qdrant-client", "faiss-cpu", "onnxruntime"):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    corpus = load_corpus(args.data)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="memwarden-peers-") as tmp:
        for size in args.sizes:
            started = time.monotonic()
            results[str(size)] = await run_size(corpus, size, args, Path(tmp) / str(size))
            results[str(size)]["run_s"] = round(time.monotonic() - started)
            print(json.dumps({size: results[str(size)]}), flush=True)
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": report.machine(),
        "python_loop_ms": python_speed_ms(),
        "load_average_1min": round(os.getloadavg()[0], 1),
        "versions": versions(),
        "k": K,
        "clients": args.clients,
        "cpu_ops": args.cpu_ops,
        "load_ops": args.load_ops,
        "fresh_tries": args.fresh,
        "not_run": {"mem0 REST server": mem0_server_status()},
        "results": results,
    }


def _by_size(result: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return sorted(result["results"].items(), key=lambda item: int(item[0]))


def _rate(row: dict[str, Any], rate: str, failures: str, clients: str) -> str:
    failed = row.get(failures, {}).get(clients, 0)
    value = row[rate].get(clients, "")
    return f"{value} ({failed} of {row['requests'][clients]} failed)" if failed else str(value)


def _pair(summary: dict[str, float]) -> str:
    return f"{summary['p50']} / {summary['p95']}"


def markdown(result: dict[str, Any], plots: dict[str, Path]) -> str:
    """The run as docs/benchmarks.md shows it: one row per system and size, notes, the plots."""
    top = str(max(result["clients"]))
    rows = []
    for size, at in _by_size(result):
        for r in at["systems"].values():
            fresh = r["searchable_after"]
            rows.append(
                [
                    r["label"],
                    f"{int(size):,}",
                    _pair(r["add_ms"]),
                    r["ingest_s"],
                    fresh["p50_ms"] if fresh["p50_ms"] is not None else f"not found ({fresh['missed']} tries)",
                    _pair(r["search_ms"]),
                    _rate(r, "searches_per_s", "search_failures", top),
                    _rate(r, "writes_per_s", "write_failures", top),
                    r["recall@5"],
                    r["cpu_ms_per_add"],
                    r["cpu_ms_per_search"],
                ]
            )
    headers = [
        "system",
        "N",
        "add p50 / p95 ms",
        "ingest s",
        "searchable after, p50 ms",
        "search p50 / p95 ms",
        f"searches/s, {top} clients",
        f"writes/s, {top} clients",
        "R@5",
        "CPU ms per add",
        "CPU ms per search",
    ]
    sizes = ", ".join(f"N={int(size):,}: {at['questions']} questions" for size, at in _by_size(result))
    notes = [
        f"LoCoMo turns of one owner, k={result['k']}; {sizes} (category 1-4, evidence within the N turns). "
        f"Versions: {', '.join(f'{n} {v}' for n, v in result['versions'].items())}. python_loop_ms "
        f"{result['python_loop_ms']}, load average {result['load_average_1min']} at the end.",
        "memwarden runs as `memwarden up` in a process of its own, over HTTP with a workflow per operation; its "
        "concurrent clients are a process of their own. The peers run in the bench's process; their concurrent "
        "clients are threads calling the library.",
    ]
    for size, at in _by_size(result):
        mw = at["systems"].get(MEMWARDEN)
        if mw:
            counted = mw["decisions_on_turns"]
            decisions = ", ".join(f"{n:,} {d}" for d, n in sorted(counted.items()) if d != CONFIRMED)
            confirmed = f" ({counted[CONFIRMED]:,} PENDING confirmed by the owner)" if counted.get(CONFIRMED) else ""
            notes.append(f"memwarden's gate on the {int(size):,} turns: {decisions}{confirmed}.")
    seen: set[tuple[str, str]] = set()
    for size, at in _by_size(result):
        for r in at["systems"].values():
            for note in r["notes"]:
                if (r["label"], note) not in seen:
                    seen.add((r["label"], note))
                    notes.append(f"{r['label']}: {note}.")
        for r in at["systems"].values():
            for warning, count in r.get("warnings", {}).items():
                notes.append(f"{r['label']} at N={int(size):,} logged {count}x under {warning}.")
            for error, count in r.get("errors", {}).items():
                notes.append(f"{r['label']} at N={int(size):,}: {count} calls raised under {error}.")
            after = r.get("searches_after_concurrent_writes", "answered")
            if after != "answered":
                notes.append(f"{r['label']} at N={int(size):,}, after the concurrent writes, a search raises {after}.")
    for what, reasons in result["not_run"].items():
        if reasons:
            notes.append(f"Not run: {what}, because " + "; ".join(reasons) + ".")
    links = " · ".join(
        f"[{name}]({os.path.relpath(path, report.DOC.parent)})" for name, path in plots.items() if path.exists()
    )
    parts = [report.table(headers, rows), *notes]
    if links:
        parts.append(f"Plots: {links}.")
    return "\n\n".join(parts)


def plot(result: dict[str, Any], where: Path) -> dict[str, Path]:
    """Three PNGs: latency against N, throughput against clients (the largest N), R@5 per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    where.mkdir(parents=True, exist_ok=True)
    sizes = sorted(result["results"], key=int)
    keys = list(result["results"][sizes[-1]]["systems"])
    label = {k: result["results"][sizes[-1]]["systems"][k]["label"] for k in keys}
    paths = {
        "latency against N": where / "peers-latency.png",
        "throughput against clients": where / "peers-throughput.png",
        "R@5 per system": where / "peers-recall.png",
    }

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, metric, title in ((axes[0], "add_ms", "add"), (axes[1], "search_ms", "search")):
        for k in keys:
            xs = [int(s) for s in sizes if k in result["results"][s]["systems"]]
            rows = [result["results"][s]["systems"][k][metric] for s in sizes if k in result["results"][s]["systems"]]
            line = ax.plot(xs, [r["p50"] for r in rows], marker="o", label=label[k])[0]
            ax.plot(xs, [r["p95"] for r in rows], linestyle="--", marker="x", color=line.get_color(), alpha=0.6)
        ax.set(title=f"{title} latency (p50 o, p95 x)", xlabel="memories of the owner (N)", ylabel="ms")
        ax.set_xticks([int(s) for s in sizes])
        ax.grid(alpha=0.3)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(paths["latency against N"], dpi=110)
    plt.close(fig)

    largest = result["results"][sizes[-1]]["systems"]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, metric, title in ((axes[0], "searches_per_s", "searches/s"), (axes[1], "writes_per_s", "writes/s")):
        for k in keys:
            rates = largest[k][metric]
            ax.plot([int(c) for c in rates], list(rates.values()), marker="o", label=label[k])
        ax.set(title=f"{title} at N={int(sizes[-1]):,}", xlabel="concurrent clients", ylabel=title)
        ax.set_xscale("log", base=2)
        ax.set_xticks(result["clients"], [str(c) for c in result["clients"]])
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(paths["throughput against clients"], dpi=110)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(9, 4.2))
    width = 0.8 / len(sizes)
    for j, s in enumerate(sizes):
        values = [result["results"][s]["systems"].get(k, {}).get("recall@5", 0.0) for k in keys]
        bars = ax.bar([i + j * width for i in range(len(keys))], values, width, label=f"N={int(s):,}")
        ax.bar_label(bars, fmt="%.3f", fontsize=7)
    names = [textwrap.fill(label[k], 22) for k in keys]
    ax.set_xticks([i + width * (len(sizes) - 1) / 2 for i in range(len(keys))], names, fontsize=7)
    ax.set(title=f"R@{result['k']} on LoCoMo, one owner", ylabel=f"R@{result['k']}", ylim=(0, 1))
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(paths["R@5 per system"], dpi=110)
    plt.close(fig)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo's locomo10.json")
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 5000], help="turns of the one owner")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--fresh", type=int, default=5, help="tries of 'add, then search until found'")
    parser.add_argument("--cpu-ops", type=int, default=100, help="adds, then searches, per system for CPU per op")
    parser.add_argument("--load-ops", type=int, default=160, help="requests per system at each client count")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--systems", nargs="+", choices=SYSTEMS, default=list(SYSTEMS))
    parser.add_argument("--out", type=Path, default=None, help="also write the JSON result here")
    parser.add_argument("--plots", type=Path, default=DOC_IMG, help="where the PNGs go")
    parser.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    args = parser.parse_args()
    if args.publish and not args.plots.resolve().is_relative_to(report.DOC.parent.resolve()):
        parser.error("--publish links the plots from docs/benchmarks.md: keep --plots under docs/")
    result = event_loop.run(main_async(args))
    plots = plot(result, args.plots)
    text = json.dumps(result, indent=2)
    print(text)
    print(markdown(result, plots))
    if args.out:
        args.out.write_text(text + "\n")
    if args.publish:
        report.publish("peers", markdown(result, plots))


if __name__ == "__main__":
    main()
