"""CPU per search, per write and per Temporal floor through the API, split by part of the stack.

    nice -n 10 .venv/bin/python -m bench.cpu_parts [--size 10000] [--n 100] [--warmup 40] [--publish]
    (needs yappi: `.venv/bin/pip install -e '.[bench]'`)

Why: `bench.latency` and `bench.remember_bench` give CPU per operation by thread group (event loop,
Python threads, native threads, dev server), which says how much but not what for. Issue 26 asks for
each part's cost (HTTP, Temporal, embedding, detectors, SQL, index, audit), so that every part is
either justified or cut. This bench gives that split, on the same embedded stack as the other benches
(`bench.stack.running_stack`, `--size` memories bulk-loaded as `bench.search_phases` does).

How: for each operation (`POST /v1/search` k=5 by an agent serving a random owner, `POST /v1/memories`
as `bench.write_phases` sends it, and the Temporal floor workflow without HTTP) it runs `--warmup`
calls, then `--n` sequential calls unprofiled, then `--n` under yappi (clock "cpu", every thread,
builtins on; started and stopped around the batch only). Each batch is between two /proc readings.

- **Native CPU** (threads not running Python, and the child processes) comes from /proc: a thread of
  this process that `threading` does not know is native; by its name, Temporal's Rust core
  (`tokio-rt-worker`, `temporal-real-s`, `workflow-proces`), Qdrant Edge's search pool
  (`edge-search-*`) or "native other" (uvloop's libuv pool, unnamed threads of native libraries);
  the Temporal dev server is its own line. yappi cannot see these.
- **Python CPU** is the process's CPU minus its native threads' (so a Python thread that ended
  during the batch still counts). The profiler inflates it (three times and more), and not evenly:
  yappi's cost is per call, so the sandbox's many small calls swell and onnxruntime's one long call
  does not. So its cost is taken out per call: its shape (per call, in the callee's and in the
  caller's own time, for Python and builtin callees) is calibrated on a bare loop in this run
  (`calibrate`), its size fitted per batch (`fit`, a factor k) so that the parts sum to the
  *unprofiled* batch's Python CPU per operation (less the collector's). A constant per call counts
  the shortest calls as nothing but profiler, so parts made of them (the sandbox's proxies,
  `isinstance`) come out low; the output also gives every part with the raw profile scaled by one
  factor, which errs the other way: the truth lies between. The garbage collector is its own line:
  its CPU in the unprofiled batch, measured with `gc.callbacks`; the profiled batch runs without
  automatic collection, since a full collection (hundreds of ms) would land in whichever function
  allocated last. The native lines come from the unprofiled batch too, so the lines add up to the
  measured total CPU per operation without the profiler.
- **Attribution rule.** yappi gives each function's own time (`tsub`: its time minus its Python and
  C callees'). A function whose module `PART_TABLE` names (the first entry that is a prefix of its
  file's path relative to its `sys.path` root; for a builtin, of its module or its type's module:
  `_sqlite3`, `onnxruntime`, `pydantic_core`, `_regex`, `uvloop`...) goes to that part, whoever
  calls it (Qdrant Edge's `EdgeShard` reports its module as `builtins`, so its calls reach the index
  through their caller, `memwarden/stores/vectors_edge.py`). A *generic* function the table does not
  name (a builtin such as `isinstance`, `dict.get`, `exec`, `_json`; the standard library such as
  `contextlib`, `inspect`, `uuid`, `functools`; code compiled from a string such as a dataclass's
  `__init__`) serves its caller, so its own time is split among its callers in proportion to the own
  time yappi recorded under each (the child stats), each share going to that caller's part; a
  generic caller passes on its own callers' shares (iterated to a fixed point). Any other module the
  table does not name is "other", as is a generic function with no recorded caller (called by a
  frame entered before the profiler started).
- The bench's own HTTP client (httpx, httpcore, and this harness) runs in this process and is its
  own line, "bench client", not HTTP: it is what an agent backend pays, not the service. h11 is
  shared by uvicorn and httpcore and counts as HTTP. memwarden code outside every named part
  (services, records, identity, policy) is "memwarden other"; OpenTelemetry and memwarden's
  telemetry modules are "telemetry"; the import machinery (the sandbox re-imports workflow modules
  per run) is "imports"; the bearer token's check (`jwt`) is HTTP.

The output is a table per operation (CPU ms per op by part) and the differences search - floor and
write - floor: what memwarden adds on top of Temporal's least possible workflow. Every text is synthetic.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import random
import re
import sys
import sysconfig
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import report
from bench.latency import TENANT
from bench.load_clients import body
from bench.stack import Stack, python_speed_ms, running_stack
from bench.synthetic import bulk_load, owner, pool_vectors, sentence, sentence_pool
from worker import event_loop

HTTP = "HTTP"
TEMPORAL = "Temporal"
EMBEDDING = "embedding"
DETECTORS = "detectors"
SQL = "SQL"
INDEX = "index"
AUDIT = "audit"
PYDANTIC = "pydantic"
LOOP = "event loop"
TELEMETRY = "telemetry"
IMPORTS = "imports"
CLIENT = "bench client"
MEMWARDEN = "memwarden other"
OTHER = "other"
PYTHON_PARTS = (
    HTTP,
    TEMPORAL,
    EMBEDDING,
    DETECTORS,
    SQL,
    INDEX,
    AUDIT,
    PYDANTIC,
    TELEMETRY,
    LOOP,
    IMPORTS,
    MEMWARDEN,
    OTHER,
    CLIENT,
)

CORE = "Temporal core (native)"
INDEX_NATIVE = "index (native)"
NATIVE_OTHER = "native other"
DEV_SERVER = "dev server"
NATIVE_PARTS = (CORE, INDEX_NATIVE, NATIVE_OTHER, DEV_SERVER)
GC = "garbage collector"
"""Python CPU too, but measured apart (`GcClock`) and kept out of the profile (see `run_batch`)."""
GC_KEYS = ("gc0", "gc1", "gc2")
NATIVE_NAMES: tuple[tuple[str, str], ...] = (
    # Thread names (Linux keeps 15 characters) the native pools give their threads.
    ("tokio", CORE),  # the SDK core's Tokio runtime
    ("temporal", CORE),  # "temporal-real-s..." in the SDK bridge
    ("workflow-proces", CORE),  # the core's "workflow-processing" threads
    ("edge-search", INDEX_NATIVE),  # Qdrant Edge's search pool
)

PART_TABLE: tuple[tuple[str, str], ...] = (
    # More specific first: the first prefix that matches wins.
    ("memwarden/stores/sql/audit_log.py", AUDIT),
    ("memwarden/stores/audit.py", AUDIT),
    ("memwarden/stores/content_keys.py", AUDIT),
    ("memwarden/audit_", AUDIT),
    ("memwarden/stores/sql/", SQL),
    ("memwarden/stores/sql_models.py", SQL),
    ("sqlalchemy/", SQL),
    ("sqlite3/", SQL),
    ("_sqlite3/", SQL),
    ("aiosqlite/", SQL),
    ("asyncpg/", SQL),
    ("memwarden/stores/vector", INDEX),  # vectors.py, vectors_edge.py, vectors_qdrant.py, vector_backends.py
    ("memwarden/stores/edge_vacuum.py", INDEX),
    ("qdrant_edge/", INDEX),
    ("memwarden/embed.py", EMBEDDING),
    ("onnxruntime/", EMBEDDING),
    ("tokenizers/", EMBEDDING),
    ("memwarden/detect/", DETECTORS),
    ("presidio", DETECTORS),  # presidio_analyzer, presidio_anonymizer
    ("detect_secrets/", DETECTORS),
    ("phonenumbers/", DETECTORS),
    ("regex/", DETECTORS),
    ("_regex/", DETECTORS),
    ("confusable_homoglyphs/", DETECTORS),
    ("spacy/", DETECTORS),  # presidio's NLP engine
    ("memwarden/temporal/", TEMPORAL),
    ("temporalio/", TEMPORAL),
    ("google/protobuf/", TEMPORAL),
    ("workflows/", TEMPORAL),
    ("activities/", TEMPORAL),
    ("worker/", TEMPORAL),
    ("bench/floor.py", TEMPORAL),
    ("httpx/", CLIENT),
    ("httpcore/", CLIENT),
    ("bench/", CLIENT),
    ("memwarden/telemetry.py", TELEMETRY),
    ("api/telemetry.py", TELEMETRY),
    ("opentelemetry/", TELEMETRY),
    ("api/", HTTP),
    ("jwt/", HTTP),  # the bearer token's check, which the API does on every request
    ("uvicorn/", HTTP),
    ("starlette/", HTTP),
    ("fastapi/", HTTP),
    ("h11/", HTTP),
    ("anyio/", HTTP),
    ("sniffio/", HTTP),
    ("pydantic/", PYDANTIC),
    ("pydantic_core/", PYDANTIC),
    ("asyncio/", LOOP),
    ("_asyncio/", LOOP),
    ("uvloop/", LOOP),
    ("selectors.py", LOOP),
    ("select/", LOOP),
    ("concurrent/futures/", LOOP),
    ("threading.py", LOOP),
    ("_thread/", LOOP),
    ("_queue/", LOOP),
    ("queue.py", LOOP),
    ("<frozen importlib", IMPORTS),
    ("importlib/", IMPORTS),
    ("memwarden/", MEMWARDEN),
    ("stack/", MEMWARDEN),
)
"""(path prefix, part), matched against a function's file relative to its sys.path root, or for a
builtin against its module (or its type's module) with dots as slashes and a trailing slash."""


def part_of(key: str) -> str | None:
    """The part a module key belongs to, None when the table names none."""
    for prefix, part in PART_TABLE:
        if key.startswith(prefix):
            return part
    return None


BUILTIN_METHOD = re.compile(r"of '([\w.]+)' objects")


def module_key(module: str, name: str, *, builtin: bool, roots: Sequence[str] = tuple(sys.path)) -> str:
    """The key `part_of` reads: a Python function's file relative to the longest `roots` entry holding
    it (site-packages, the standard library, the project); a builtin's module (for a method, its
    type's, which yappi puts in the name: "<method 'execute' of 'sqlite3.Connection' objects>") as a
    path with a trailing slash ("sqlite3/Connection/")."""
    if builtin:
        found = BUILTIN_METHOD.search(name)
        dotted = found.group(1) if module == "builtins" and found else module
        return dotted.replace(".", "/") + "/"
    path = module.replace(os.sep, "/")
    best = ""
    for root in roots:
        r = root.replace(os.sep, "/").rstrip("/") + "/"
        if root and path.startswith(r) and len(r) > len(best):
            best = r
    return path[len(best) :]


STDLIB = tuple({sysconfig.get_paths()[k].replace(os.sep, "/").rstrip("/") + "/" for k in ("stdlib", "platstdlib")})


def generic(module: str, *, builtin: bool) -> bool:
    """Whether a function serves whoever calls it (a builtin, the standard library, code compiled from a
    string such as a dataclass's `__init__`, a frozen module) rather than being a part of its own.
    Only functions the table names no part for are asked."""
    if builtin or module.startswith("<"):
        return True
    path = module.replace(os.sep, "/")
    return path.startswith(STDLIB) and "/site-packages/" not in path


@dataclass
class Func:
    """One function's profile, as yappi gives it: own CPU seconds and its callees' own seconds."""

    index: int
    key: str
    name: str
    builtin: bool
    tsub: float
    children: list[tuple[int, float]] = field(default_factory=list)
    """(callee index, the callee's own seconds when called from this function)."""
    generic: bool = False
    """Unnamed by the table, its time goes to its callers' parts (see `generic`)."""
    calls: int = 0
    child_calls: tuple[int, int] = (0, 0)
    """How many calls it made to Python functions and to builtins."""


@dataclass(frozen=True)
class Overhead:
    """yappi's own cost per call, in CPU seconds, as it lands in the profile: in the called function's
    own time (`callee_*`) and in its caller's (`caller_*`), for a Python callee and a builtin one."""

    callee_py: float = 0.0
    caller_py: float = 0.0
    callee_builtin: float = 0.0
    caller_builtin: float = 0.0

    def times(self, k: float) -> Overhead:
        """The same shape, `k` times the size."""
        return Overhead(*(k * v for v in dataclasses.astuple(self)))

    def of(self, f: Func) -> float:
        """The profiler's seconds inside `f`'s own time."""
        py, builtin = f.child_calls
        return (
            f.calls * (self.callee_builtin if f.builtin else self.callee_py)
            + py * self.caller_py
            + builtin * self.caller_builtin
        )


def deflated(funcs: Iterable[Func], overhead: Overhead) -> list[Func]:
    """The profile with the profiler's own cost taken out of each function's own time (never below
    zero). yappi's cost is per call (its hook runs on each call and return), so it inflates a part made
    of many small calls (the sandbox's proxies, `isinstance`) three times or more, and one made of a few
    long native calls (onnxruntime's `run`) hardly at all; scaling every part by one factor would shrink
    the embedding to a third of what `bench.worker_cpu` measures for it without a profiler."""
    return [dataclasses.replace(f, tsub=max(0.0, f.tsub - overhead.of(f))) for f in funcs]


def _leaf() -> None:
    """Calibration: the cheapest Python call."""


def _loop(n: int) -> None:
    for _ in range(n):
        pass


def _calls_py(n: int) -> None:
    for _ in range(n):
        _leaf()


def _calls_builtin(n: int, empty: tuple[()] = ()) -> None:
    for _ in range(n):
        len(empty)


def calibrate(n: int = 200_000) -> Overhead:
    """Measure `Overhead` on this machine now: a loop of n empty calls without and with yappi (same
    settings as the batches). The callee's share is its profiled own time minus what the call costs
    unprofiled (loop of calls minus bare loop); the caller's, its profiled own time minus the bare loop."""
    import yappi

    def unprofiled(fn: Callable[[int], None]) -> float:
        best = float("inf")
        for _ in range(3):
            start = time.thread_time()
            fn(n)
            best = min(best, time.thread_time() - start)
        return best / n

    bare = unprofiled(_loop)
    found: dict[str, float] = {}
    for name, fn, leaf in (("py", _calls_py, "_leaf"), ("builtin", _calls_builtin, "len")):
        real = unprofiled(fn) - bare
        yappi.clear_stats()
        yappi.set_clock_type("cpu")
        yappi.start(builtins=True, profile_threads=False)
        fn(n)
        yappi.stop()
        stats = {s.name: s for s in yappi.get_func_stats() if s.name in (fn.__name__, leaf)}
        yappi.clear_stats()
        found[f"callee_{name}"] = max(0.0, stats[leaf].tsub / n - real)
        found[f"caller_{name}"] = max(0.0, stats[fn.__name__].tsub / n - bare)
    return Overhead(**found)


def own_part(f: Func) -> str | None:
    """A function's part by its own module; None for a generic one the table names no part for (its
    callers decide), "other" for any other unnamed module."""
    part = part_of(f.key)
    if part is None and not (f.builtin or f.generic):
        return OTHER
    return part


def attribution(funcs: Iterable[Func], passes: int = 30) -> dict[int, Counter[str]]:
    """Each function's own CPU seconds by part, under the rule the module docstring states.

    A generic function's share of each part is the weighted mean of its callers' shares (weights: its
    own seconds under each caller); callers may be generic too (a builtin called by `contextlib`
    called by the sandbox), so the shares are iterated to a fixed point (recursion makes cycles);
    a generic function no caller of which was recorded is "other"."""
    funcs = list(funcs)
    callers: dict[int, list[tuple[int, float]]] = {}
    for f in funcs:
        for child, seconds in f.children:
            if seconds > 0:
                callers.setdefault(child, []).append((f.index, seconds))
    share: dict[int, dict[str, float]] = {}  # empty: not known yet
    pending: list[Func] = []
    for f in funcs:
        mine = own_part(f)
        share[f.index] = {mine: 1.0} if mine is not None else {}
        if mine is None and callers.get(f.index):
            pending.append(f)
    for _ in range(passes):
        changed = False
        for f in pending:
            known = [(share.get(caller, {OTHER: 1.0}), w) for caller, w in callers[f.index]]
            total = sum(w for parts, w in known if parts)
            if total <= 0:
                continue
            mixed: Counter[str] = Counter()
            for parts, w in known:
                for part, fraction in parts.items():
                    mixed[part] += fraction * w / total
            new = dict(mixed)
            if any(abs(new.get(p, 0.0) - share[f.index].get(p, 0.0)) > 1e-12 for p in new.keys() | share[f.index]):
                share[f.index] = new
                changed = True
        if not changed:
            break
    return {f.index: Counter({p: f.tsub * x for p, x in (share[f.index] or {OTHER: 1.0}).items()}) for f in funcs}


def split(funcs: Iterable[Func]) -> Counter[str]:
    """Own CPU seconds by part (the sum of `attribution`)."""
    total: Counter[str] = Counter()
    for parts in attribution(funcs).values():
        total.update(parts)
    return total


def modules_in(funcs: Iterable[Func], part: str, depth: int = 2) -> Counter[str]:
    """Own CPU seconds that went to `part`, by module (the key's first `depth` path components):
    what "other" is made of, so the table can grow a line where one module dominates it."""
    funcs = list(funcs)
    attributed = attribution(funcs)
    out: Counter[str] = Counter()
    for f in funcs:
        seconds = attributed[f.index][part]
        if seconds > 0:
            out["/".join(f.key.split("/")[:depth])] += seconds
    return out


def yappi_funcs(stats: Iterable[Any]) -> list[Func]:
    """yappi's function stats as `Func`s."""
    return [
        Func(
            index=s.index,
            key=module_key(s.module, s.name, builtin=bool(s.builtin)),
            name=s.name,
            builtin=bool(s.builtin),
            tsub=s.tsub,
            children=[(c.index, c.tsub) for c in s.children],
            generic=generic(s.module, builtin=bool(s.builtin)),
            calls=s.ncall,
            child_calls=(
                sum(c.ncall for c in s.children if not c.builtin),
                sum(c.ncall for c in s.children if c.builtin),
            ),
        )
        for s in stats
    ]


# -- /proc -------------------------------------------------------------------------------------


def _stat(path: Path) -> tuple[str, float] | None:
    """(thread or process name, user + system CPU seconds) from a /proc stat file."""
    try:
        text = path.read_text()
    except OSError:
        return None  # gone meanwhile
    fields = text.rsplit(")", 1)[1].split()
    return text[text.index("(") + 1 : text.rindex(")")], (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def native_part(thread_name: str) -> str:
    """Which native line a thread `threading` does not know belongs to, by its name (`NATIVE_NAMES`);
    the rest (uvloop's libuv pool, unnamed threads of native libraries) is "native other"."""
    for prefix, part in NATIVE_NAMES:
        if thread_name.startswith(prefix):
            return part
    return NATIVE_OTHER


@dataclass
class ProcReading:
    process: float
    """This process's CPU seconds, every thread included, live or ended."""
    native: dict[int, tuple[str, float]]
    """Live native threads: tid -> (native part, CPU seconds)."""
    children: Counter[str]


def read_proc() -> ProcReading:
    """One reading: this process, its native threads (not known to `threading`), its child processes."""
    me = os.getpid()
    python = {t.native_id for t in threading.enumerate()} | {me}
    own = _stat(Path(f"/proc/{me}/stat"))
    native: dict[int, tuple[str, float]] = {}
    for task in Path(f"/proc/{me}/task").iterdir():
        tid = int(task.name)
        found = _stat(task / "stat") if tid not in python else None
        if found is not None:
            native[tid] = (native_part(found[0]), found[1])
    children: Counter[str] = Counter()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        found = _stat(stat) if ppid == me else None
        if found is not None:
            children[DEV_SERVER if found[0] == "temporal" else NATIVE_OTHER] += found[1]
    return ProcReading(process=own[1] if own else 0.0, native=native, children=children)


def proc_delta(before: ProcReading, after: ProcReading) -> dict[str, float]:
    """CPU seconds between two readings: "python" (the process minus its native threads) and the native lines."""
    out: Counter[str] = Counter()
    for tid, (part, seconds) in after.native.items():
        out[part] += seconds - (before.native[tid][1] if tid in before.native else 0.0)
    native = sum(out.values())
    for part in set(after.children) | set(before.children):
        out[part] += after.children[part] - before.children[part]
    out["python"] = after.process - before.process - native
    return dict(out)


# -- the batches -------------------------------------------------------------------------------


@dataclass
class Batch:
    """One operation's figures, in CPU seconds over `n` calls."""

    n: int
    plain: dict[str, float]
    """/proc, unprofiled: "python" and the native lines."""
    profiled: dict[str, float]
    """/proc, under yappi."""
    funcs: list[Func]
    """yappi's profile, as measured."""
    overhead: Overhead
    """The profiler's cost per call taken out of the parts (the calibration, times `k`)."""
    k: float = 1.0
    """How many times the calibrated cost per call the fit needed (`fit`)."""

    @property
    def parts(self) -> Counter[str]:
        """Own time by Python part, the profiler's per-call cost taken out (`deflated`)."""
        return split(deflated(self.funcs, self.overhead))

    def per_op_ms(self, *, uniform: bool = False) -> dict[str, float]:
        """Python parts scaled to the unprofiled Python CPU, then the native lines; ms per call.
        `uniform`: the raw profile scaled by one factor instead of the per-call cost taken out, the
        other bound (it overstates parts of many small calls as the deflation understates them)."""
        parts = split(self.funcs) if uniform else self.parts
        left = sum(parts.values())
        scale = python_without_gc(self.plain) / left if left > 0 else 0.0
        out = {p: 1000 * parts[p] * scale / self.n for p in PYTHON_PARTS}
        out[GC] = 1000 * sum(self.plain.get(k, 0.0) for k in GC_KEYS) / self.n
        out.update({p: 1000 * max(0.0, self.plain.get(p, 0.0)) / self.n for p in NATIVE_PARTS})
        return out

    def top(self, count: int = 10) -> list[tuple[str, str, float, float]]:
        """The `count` functions with the most own CPU under the profiler: (function, where it went,
        profiled ms per call, ms per call with the profiler's per-call cost taken out)."""
        attributed = attribution(self.funcs)
        ranked = sorted(self.funcs, key=lambda f: f.tsub, reverse=True)[:count]
        return [
            (label(f), went(attributed[f.index]), 1000 * f.tsub / self.n, 1000 * d.tsub / self.n)
            for f, d in zip(ranked, deflated(ranked, self.overhead), strict=True)
        ]

    def top_in(self, part: str, count: int = 5) -> list[tuple[str, float, float]]:
        """The functions whose own time makes `part` (a builtin's share from its callers in `part`):
        (function, profiled ms per call, ms per call with the profiler's cost out). What a reader
        needs to justify or cut a part."""
        raw = attribution(self.funcs)
        out = attribution(deflated(self.funcs, self.overhead))
        ranked = sorted(self.funcs, key=lambda f: raw[f.index][part], reverse=True)[:count]
        return [
            (label(f), 1000 * raw[f.index][part] / self.n, 1000 * out[f.index][part] / self.n)
            for f in ranked
            if raw[f.index][part] > 0
        ]

    def other_modules(self, count: int = 8) -> list[tuple[str, float]]:
        """What "other" is made of: its largest modules, profiled ms per call."""
        return [(m, 1000 * s / self.n) for m, s in modules_in(self.funcs, OTHER).most_common(count)]


def label(f: Func) -> str:
    """A function as the tables name it: file:function, or a builtin's module.name."""
    if not f.builtin:
        return f"{f.key}:{f.name}"
    if f.key == "builtins/" or f.name.startswith("<method"):
        return f.name
    return f"{f.key.rstrip('/').replace('/', '.')}.{f.name}"


def went(parts: Counter[str]) -> str:
    """Where one function's own time went: its part, or for a builtin its callers' parts with shares."""
    total = sum(parts.values())
    if len(parts) <= 1 or total <= 0:
        return next(iter(parts), OTHER)
    return ", ".join(f"{p} {100 * s / total:.0f}%" for p, s in parts.most_common(3))


class GcClock:
    """CPU seconds the garbage collector spends, per generation, while installed (`gc.callbacks`).

    Why: a collection runs inside whatever function allocated last, so its CPU lands in that function's
    own time in yappi's profile (a full collection of the stack's heap can put milliseconds per
    operation into a `re.Pattern.match` of json's decoder). The parts cannot say where it went; this
    line says how much of them it is."""

    def __init__(self) -> None:
        self.seconds: Counter[int] = Counter()
        self.count: Counter[int] = Counter()
        self._started: dict[int, float] = {}

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        tid = threading.get_ident()
        if phase == "start":
            self._started[tid] = time.thread_time()
        elif tid in self._started:
            generation = info.get("generation", 0)
            self.seconds[generation] += time.thread_time() - self._started.pop(tid)
            self.count[generation] += 1

    def __enter__(self) -> GcClock:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self)


async def run_batch(call: Callable[[int], Awaitable[object]], n: int, *, profile: bool) -> tuple[dict[str, float], Any]:
    """`n` calls back to back between two /proc readings, under yappi and without automatic garbage
    collection when `profile`; (delta with the collector's CPU as "gc0".."gc2", stats)."""
    import yappi

    if profile:
        # No automatic collection under the profiler: a full one (hundreds of ms with the stack's
        # heap) would land in whichever function allocated last and make it a part's top function.
        # The unprofiled batch measures the collector's CPU apart instead (`GC`).
        gc.disable()
        yappi.clear_stats()
        yappi.set_clock_type("cpu")
        yappi.start(builtins=True, profile_threads=True)
    try:
        with GcClock() as collector:
            before = read_proc()
            for i in range(n):
                await call(i)
            after = read_proc()
    finally:
        if profile:
            gc.enable()
    delta = proc_delta(before, after)
    delta.update({f"gc{g}": seconds for g, seconds in collector.seconds.items()})
    delta.update({f"gc{g} count": float(c) for g, c in collector.count.items()})
    stats = None
    if profile:
        yappi.stop()
        stats = yappi.get_func_stats()
    return delta, stats


async def measure(call: Callable[[int], Awaitable[object]], n: int, warmup: int, overhead: Overhead) -> Batch:
    """Warm-up, an unprofiled batch, a profiled batch."""
    import yappi

    for i in range(warmup):
        await call(i)
    plain, _ = await run_batch(call, n, profile=False)
    profiled, stats = await run_batch(call, n, profile=True)
    funcs = yappi_funcs(stats)
    yappi.clear_stats()
    k = fit(funcs, overhead, python_without_gc(plain))
    return Batch(n=n, plain=plain, profiled=profiled, funcs=funcs, overhead=overhead.times(k), k=k)


def python_without_gc(delta: dict[str, float]) -> float:
    """A batch's Python CPU less the garbage collector's (which the profiled batch does not run)."""
    return delta["python"] - sum(delta.get(k, 0.0) for k in GC_KEYS)


def fit(funcs: Sequence[Func], overhead: Overhead, target: float) -> float:
    """The factor k for which the profile, `overhead` times k taken out, sums to `target` (the
    unprofiled Python CPU): the calibration gives the profiler's cost per call on a bare loop, but in
    the service's deep stacks of many distinct functions each call costs it more (its tables and caches
    are bigger), so its shape is kept and its size fitted per batch. Bisection: the sum falls as k grows."""

    def left(k: float) -> float:
        return sum(f.tsub for f in deflated(funcs, overhead.times(k)))

    if left(0.0) <= target:
        return 0.0
    lo, hi = 0.0, 1.0
    while left(hi) > target and hi < 1e4:
        lo, hi = hi, hi * 2
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if left(mid) > target else (lo, mid)
    return (lo + hi) / 2


async def main(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(7)
    pool = sentence_pool(rng)
    with tempfile.TemporaryDirectory(prefix="memwarden-cpu-parts-") as tmp:
        async with running_stack(Path(tmp)) as stack:
            vectors = await pool_vectors(stack, pool)
            await bulk_load(stack, 0, args.size, args.per_owner, pool, vectors, tenant=TENANT)
            owners = max(1, args.size // args.per_owner)
            tokens = [
                stack.token(tenant=TENANT, sub=f"svc-{o}", role="agent", agent="bench", on_behalf_of=owner(o))
                for o in range(owners)
            ]
            writer = {"Authorization": f"Bearer {stack.token(tenant='bench', sub='solo', role='user')}"}
            overhead = calibrate()
            decisions: Counter[str] = Counter()
            batches = {
                "floor": await measure(floor(stack), args.n, args.warmup, overhead),
                "search": await measure(search(stack, tokens, rng), args.n, args.warmup, overhead),
                "write": await measure(write(stack, writer, rng, decisions), args.n, args.warmup, overhead),
            }
            threads = sorted({name for name in thread_names()})
    return {
        "python_loop_ms": python_speed_ms(),
        "size": args.size,
        "n": args.n,
        "batches": batches,
        "decisions": dict(decisions),
        "overhead_ns": {k: round(v * 1e9) for k, v in dataclasses.asdict(overhead).items()},
        "threads": threads,
    }


def floor(stack: Stack) -> Callable[[int], Awaitable[object]]:
    async def call(_: int) -> None:
        await stack.floor()

    return call


def search(stack: Stack, tokens: list[str], rng: random.Random) -> Callable[[int], Awaitable[object]]:
    """`POST /v1/search` k=5 as `bench.search_phases` sends it (queries drawn before the clock matters)."""

    async def call(_: int) -> None:
        token = tokens[rng.randrange(len(tokens))]
        answer = await stack.http.post(
            "/v1/search", json={"query": sentence(rng), "k": 5}, headers={"Authorization": f"Bearer {token}"}
        )
        answer.raise_for_status()

    return call


def write(
    stack: Stack, headers: dict[str, str], rng: random.Random, decisions: Counter[str]
) -> Callable[[int], Awaitable[object]]:
    """`POST /v1/memories` as `bench.write_phases` sends it; `decisions` counts the answers' decisions
    (a NOOP costs less than an ADD, so the mix is part of the figure)."""

    async def call(_: int) -> None:
        answer = await stack.http.post("/v1/memories", headers=headers, json=body(rng, "solo"))
        answer.raise_for_status()
        decisions[str(answer.json().get("decision"))] += 1

    return call


def thread_names() -> list[str]:
    """This process's native threads' names with their line, for the record (which pools exist)."""
    python = {t.native_id for t in threading.enumerate()} | {os.getpid()}
    names: Counter[str] = Counter()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        found = _stat(task / "stat") if int(task.name) not in python else None
        if found is not None:
            names[f"{found[0]} -> {native_part(found[0])}"] += 1
    return [f"{name} x{count}" for name, count in sorted(names.items())]


# -- output ------------------------------------------------------------------------------------


def table_rows(batches: dict[str, Batch]) -> list[list[object]]:
    """One row per part (then the totals): ms per op for search, write, floor, the two differences,
    and the three operations again with the profile scaled uniformly (the other bound)."""
    ms = {op: b.per_op_ms() for op, b in batches.items()}
    flat = {op: b.per_op_ms(uniform=True) for op, b in batches.items()}
    ops = ("search", "write", "floor")
    rows: list[list[object]] = []
    for part in (*PYTHON_PARTS, GC, *NATIVE_PARTS):
        s, w, f = (ms[op][part] for op in ops)
        if max(abs(s), abs(w), abs(f)) >= 0.05:
            rows.append(
                [part, f"{s:.1f}", f"{w:.1f}", f"{f:.1f}", f"{s - f:+.1f}", f"{w - f:+.1f}"]
                + [f"{flat[op][part]:.1f}" if part in (*PYTHON_PARTS, GC) else "" for op in ops]
            )
    s, w, f = (sum(ms[op].values()) for op in ops)
    rows.append(
        [f"**{v}**" for v in ("total", f"{s:.1f}", f"{w:.1f}", f"{f:.1f}", f"{s - f:+.1f}", f"{w - f:+.1f}")]
        + [f"{sum(flat[op].values()):.1f}" for op in ops]
    )
    return rows


def coverage_rows(batches: dict[str, Batch]) -> list[list[object]]:
    """What the profiler did to Python CPU (ms per op): unprofiled, profiled (/proc), traced by yappi,
    the profiler's cost per call taken out and its fitted factor; and how many full collections ran."""
    rows: list[list[object]] = []
    for op in ("search", "write", "floor"):
        b = batches[op]
        traced_s = sum(f.tsub for f in b.funcs)
        plain, prof, traced = (1000 * x / b.n for x in (b.plain["python"], b.profiled["python"], traced_s))
        calls = sum(f.calls for f in b.funcs) / b.n
        rows.append(
            [
                op,
                f"{plain:.1f}",
                f"{prof:.1f}",
                f"{traced:.1f}",
                f"{calls:,.0f}",
                f"{1e9 * sum(b.overhead.of(f) for f in b.funcs) / b.n / max(1.0, calls):.0f}",
                f"{b.k:.2f}",
                f"{b.plain.get('gc2 count', 0):.0f}",
            ]
        )
    return rows


def markdown(result: dict[str, Any]) -> str:
    """The run as docs/benchmarks.md shows it: the parts table, the profiler's coverage, the top functions."""
    batches: dict[str, Batch] = result["batches"]
    parts = report.table(
        [
            "part",
            "search",
            "write",
            "floor",
            "search - floor",
            "write - floor",
            "search, scaled uniformly",
            "write, scaled uniformly",
            "floor, scaled uniformly",
        ],
        table_rows(batches),
    )
    coverage = report.table(
        [
            "operation",
            "Python CPU ms/op unprofiled",
            "profiled (/proc)",
            "traced by yappi",
            "calls traced per op",
            "profiler ns per call",
            "k (fitted / calibrated cost)",
            "full collections, unprofiled batch",
        ],
        coverage_rows(batches),
    )
    tops = [
        f"Top 10 functions by own CPU per {op} under the profiler (a builtin's part: its callers' shares):\n\n"
        + report.table(
            ["function", "part", "ms/op profiled", "ms/op, profiler's cost out"],
            [[f"`{name}`", part, f"{ms:.2f}", f"{out:.2f}"] for name, part, ms, out in batches[op].top()],
        )
        for op in ("search", "write")
    ]
    others = 'What "other" is made of (profiled ms per op): ' + "; ".join(
        f"{op}: " + ", ".join(f"`{m}` {ms:.2f}" for m, ms in batches[op].other_modules()) for op in ("search", "write")
    )
    notes = (
        f"{result['size']:,} memories; per operation a warm-up, {result['n']} sequential calls unprofiled, "
        f"{result['n']} under yappi; CPU ms per call. Python parts: yappi's own time per function minus the "
        f"profiler's cost per call (its shape calibrated on a bare loop in this run, ns: {result['overhead_ns']}; "
        f"its size fitted, k times, so that the parts sum to the unprofiled batch's Python CPU less the "
        f"garbage collector's, which is its own line, measured in that batch), by part. "
        f"Native lines: the unprofiled batch's /proc figures. The last three columns scale the raw profile "
        f"by one factor instead: the other bound, since a per-call cost fitted as a constant counts the "
        f"shortest calls (`isinstance`, the sandbox's proxies) as nothing but profiler, and one factor "
        f"counts them as inflated no more than onnxruntime's one long call. Write decisions (warm-up "
        f"included): {result['decisions']}. python_loop_ms {result['python_loop_ms']}."
    )
    return "\n\n".join([parts, notes, coverage, *tops, others])


def print_result(result: dict[str, Any]) -> None:
    """The published markdown, then (not published: too long for the document) the functions that
    make each part of a search and of a write, and the native threads seen."""
    print(markdown(result))
    for op in ("search", "write"):
        print(f"\nWhat each part of a {op} is made of (function: profiled ms/op, profiler's cost out):")
        for part in PYTHON_PARTS:
            top = result["batches"][op].top_in(part)
            if top:
                print(f"  {part}: " + "; ".join(f"{name} {ms:.2f}/{out:.2f}" for name, ms, out in top))
    print("\nnative threads at the end:", ", ".join(result["threads"]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--per-owner", type=int, default=1000)
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument(
        "--warmup",
        type=int,
        default=40,
        help="calls before each operation's batches (the first tens cost twice as much)",
    )
    parser.add_argument("--publish", action="store_true", help="rewrite this bench's section of docs/benchmarks.md")
    arguments = parser.parse_args()
    started = time.monotonic()
    measured = event_loop.run(main(arguments))
    print_result(measured)
    print(f"\n({time.monotonic() - started:.0f} s)")
    if arguments.publish:
        report.publish("cpu_parts", markdown(measured))
