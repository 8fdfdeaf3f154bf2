"""bench.cpu_parts puts each function's CPU in the part its module belongs to, and a generic
function's (a builtin, the standard library) in its callers' parts."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from bench import cpu_parts as cp

ROOTS = (
    "/venv/lib/python3.11/site-packages",
    "/usr/lib/python3.11",
    "/repo",
)


@pytest.mark.parametrize(
    ("module", "name", "builtin", "part"),
    [
        ("/repo/api/routes/search.py", "search", False, cp.HTTP),
        ("/venv/lib/python3.11/site-packages/uvicorn/protocols/http/h11_impl.py", "f", False, cp.HTTP),
        ("/venv/lib/python3.11/site-packages/starlette/routing.py", "f", False, cp.HTTP),
        ("/venv/lib/python3.11/site-packages/h11/_connection.py", "f", False, cp.HTTP),
        ("/venv/lib/python3.11/site-packages/jwt/api_jws.py", "f", False, cp.HTTP),
        ("/repo/api/telemetry.py", "f", False, cp.TELEMETRY),
        ("/venv/lib/python3.11/site-packages/opentelemetry/sdk/trace/__init__.py", "f", False, cp.TELEMETRY),
        ("/venv/lib/python3.11/site-packages/httpx/_client.py", "post", False, cp.CLIENT),
        ("/venv/lib/python3.11/site-packages/httpcore/_async/connection.py", "f", False, cp.CLIENT),
        ("/venv/lib/python3.11/site-packages/temporalio/worker/_workflow.py", "f", False, cp.TEMPORAL),
        ("/venv/lib/python3.11/site-packages/google/protobuf/json_format.py", "f", False, cp.TEMPORAL),
        ("/repo/workflows/retrieve.py", "run", False, cp.TEMPORAL),
        ("/repo/activities/search.py", "f", False, cp.TEMPORAL),
        ("/repo/memwarden/temporal/codec.py", "encode", False, cp.TEMPORAL),
        ("/repo/bench/floor.py", "noop", False, cp.TEMPORAL),
        ("/repo/memwarden/embed.py", "embed", False, cp.EMBEDDING),
        ("onnxruntime.capi.onnxruntime_pybind11_state", "run", True, cp.EMBEDDING),
        ("/venv/lib/python3.11/site-packages/tokenizers/__init__.py", "f", False, cp.EMBEDDING),
        ("/repo/memwarden/detect/secrets.py", "scan", False, cp.DETECTORS),
        ("/venv/lib/python3.11/site-packages/presidio_analyzer/analyzer_engine.py", "f", False, cp.DETECTORS),
        ("/venv/lib/python3.11/site-packages/detect_secrets/core/scan.py", "f", False, cp.DETECTORS),
        ("/venv/lib/python3.11/site-packages/phonenumbers/phonenumberutil.py", "f", False, cp.DETECTORS),
        ("/venv/lib/python3.11/site-packages/regex/regex.py", "compile", False, cp.DETECTORS),
        ("builtins", "<method 'search' of '_regex.Pattern' objects>", True, cp.DETECTORS),
        ("/repo/memwarden/stores/sql/memories.py", "f", False, cp.SQL),
        ("/venv/lib/python3.11/site-packages/sqlalchemy/engine/base.py", "f", False, cp.SQL),
        ("/venv/lib/python3.11/site-packages/aiosqlite/core.py", "f", False, cp.SQL),
        ("builtins", "<method 'execute' of 'sqlite3.Connection' objects>", True, cp.SQL),
        ("_sqlite3", "connect", True, cp.SQL),
        ("/repo/memwarden/stores/vectors_edge.py", "hybrid", False, cp.INDEX),
        ("/repo/memwarden/stores/vectors.py", "index_point", False, cp.INDEX),
        ("builtins", "<method 'query' of 'qdrant_edge.Shard' objects>", True, cp.INDEX),
        ("/repo/memwarden/stores/sql/audit_log.py", "append", False, cp.AUDIT),
        ("/repo/memwarden/stores/audit.py", "f", False, cp.AUDIT),
        ("/repo/memwarden/stores/content_keys.py", "f", False, cp.AUDIT),
        ("/repo/memwarden/audit_signing.py", "sign", False, cp.AUDIT),
        ("/venv/lib/python3.11/site-packages/pydantic/main.py", "model_validate", False, cp.PYDANTIC),
        (
            "builtins",
            "<method 'validate_python' of 'pydantic_core._pydantic_core.SchemaValidator' objects>",
            True,
            cp.PYDANTIC,
        ),
        ("/usr/lib/python3.11/asyncio/events.py", "_run", False, cp.LOOP),
        ("/usr/lib/python3.11/selectors.py", "select", False, cp.LOOP),
        ("/usr/lib/python3.11/concurrent/futures/thread.py", "run", False, cp.LOOP),
        ("/usr/lib/python3.11/threading.py", "wait", False, cp.LOOP),
        ("builtins", "<method 'run_until_complete' of 'uvloop.Loop' objects>", True, cp.LOOP),
        ("<frozen importlib._bootstrap>", "_find_and_load", False, cp.IMPORTS),
        ("/repo/memwarden/services/retrieve.py", "search", False, cp.MEMWARDEN),
        ("/repo/memwarden/records.py", "f", False, cp.MEMWARDEN),
        ("/venv/lib/python3.11/site-packages/typing_extensions.py", "f", False, cp.OTHER),
    ],
)
def test_module_paths_map_to_their_part(module: str, name: str, builtin: bool, part: str) -> None:
    key = cp.module_key(module, name, builtin=builtin, roots=ROOTS)
    found = cp.own_part(cp.Func(index=0, key=key, name=name, builtin=builtin, tsub=1.0))
    assert found == part, (module, key)


def test_a_path_is_taken_relative_to_its_longest_root() -> None:
    # site-packages sits under the venv's lib, which could also be a root: the longer one wins.
    roots = ("/venv/lib/python3.11", "/venv/lib/python3.11/site-packages")
    assert cp.module_key("/venv/lib/python3.11/site-packages/h11/_state.py", "f", builtin=False, roots=roots) == (
        "h11/_state.py"
    )


@pytest.mark.parametrize(
    ("module", "builtin", "expected"),
    [
        ("builtins", True, True),
        (f"{cp.STDLIB[0]}contextlib.py", False, True),
        ("<string>", False, True),
        ("/venv/lib/python3.11/site-packages/typing_extensions.py", False, False),
        ("/repo/memwarden/records.py", False, False),
    ],
)
def test_generic_functions_are_builtins_and_the_standard_library(module: str, builtin: bool, expected: bool) -> None:
    assert cp.generic(module, builtin=builtin) is expected


def func(index: int, key: str, tsub: float, children: list[tuple[int, float]] | None = None, **kw: Any) -> cp.Func:
    return cp.Func(index=index, key=key, name=f"f{index}", builtin=False, tsub=tsub, children=children or [], **kw)


def test_a_generic_function_is_split_among_its_callers_by_their_own_time_under_each() -> None:
    funcs = [
        func(1, "api/routes/search.py", 1.0, [(3, 0.3)]),
        func(2, "temporalio/worker/_workflow.py", 2.0, [(3, 0.1)]),
        cp.Func(index=3, key="builtins/", name="isinstance", builtin=True, tsub=0.4),
        cp.Func(index=4, key="_sqlite3/", name="connect", builtin=True, tsub=0.5),  # named: its own part
        cp.Func(index=5, key="builtins/", name="len", builtin=True, tsub=0.2),  # no caller recorded
    ]
    parts = cp.split(funcs)
    assert parts[cp.HTTP] == pytest.approx(1.0 + 0.3)
    assert parts[cp.TEMPORAL] == pytest.approx(2.0 + 0.1)
    assert parts[cp.SQL] == pytest.approx(0.5)
    assert parts[cp.OTHER] == pytest.approx(0.2)
    assert sum(parts.values()) == pytest.approx(sum(f.tsub for f in funcs))


def test_generic_callers_pass_on_their_callers_parts() -> None:
    # memwarden/detect -> contextlib (generic) -> next (builtin): next's time goes to the detectors.
    funcs = [
        func(1, "memwarden/detect/pii.py", 1.0, [(2, 0.5)]),
        func(2, "contextlib.py", 0.5, [(3, 0.2)], generic=True),
        cp.Func(index=3, key="builtins/", name="next", builtin=True, tsub=0.2),
    ]
    assert cp.split(funcs) == pytest.approx({cp.DETECTORS: 1.7})


def test_recursion_among_generic_functions_settles() -> None:
    funcs = [
        func(1, "sqlalchemy/orm/query.py", 1.0, [(2, 1.0)]),
        func(2, "copy.py", 1.0, [(2, 0.5), (3, 0.1)], generic=True),
        func(3, "copy.py", 0.1, [(2, 0.5)], generic=True),
    ]
    assert cp.split(funcs) == pytest.approx({cp.SQL: 2.1})


def test_the_profilers_cost_comes_out_per_call_and_never_below_zero() -> None:
    overhead = cp.Overhead(callee_py=0.01, caller_py=0.02, callee_builtin=0.001, caller_builtin=0.002)
    busy = func(1, "memwarden/embed.py", 1.0, calls=3, child_calls=(10, 100))
    tiny = func(2, "temporalio/worker/_workflow.py", 0.01, calls=5)
    out = cp.deflated([busy, tiny], overhead)
    assert out[0].tsub == pytest.approx(1.0 - 3 * 0.01 - 10 * 0.02 - 100 * 0.002)
    assert out[1].tsub == 0.0


def test_the_fit_makes_the_parts_sum_to_the_unprofiled_figure() -> None:
    funcs = [
        func(1, "memwarden/embed.py", 5.0, calls=1),
        func(2, "temporalio/worker/_workflow.py", 4.0, calls=1000),
    ]
    shape = cp.Overhead(callee_py=0.001)
    k = cp.fit(funcs, shape, target=6.0)
    assert sum(f.tsub for f in cp.deflated(funcs, shape.times(k))) == pytest.approx(6.0, abs=1e-6)
    assert cp.fit(funcs, shape, target=10.0) == 0.0  # nothing to take out


def test_native_threads_are_named_by_their_pools() -> None:
    assert cp.native_part("tokio-rt-worker") == cp.CORE
    assert cp.native_part("workflow-proces") == cp.CORE
    assert cp.native_part("temporal-real-s") == cp.CORE
    assert cp.native_part("edge-search-3") == cp.INDEX_NATIVE
    assert cp.native_part("libuv-worker") == cp.NATIVE_OTHER


def test_proc_delta_splits_python_from_native_threads() -> None:
    before = cp.ProcReading(process=10.0, native={7: (cp.CORE, 1.0), 8: (cp.INDEX_NATIVE, 0.5)}, children=Counter())
    after = cp.ProcReading(
        process=12.0,
        native={7: (cp.CORE, 1.4), 8: (cp.INDEX_NATIVE, 0.6), 9: (cp.NATIVE_OTHER, 0.1)},
        children=Counter({cp.DEV_SERVER: 3.0}),
    )
    delta = cp.proc_delta(before, after)
    assert delta[cp.CORE] == pytest.approx(0.4)
    assert delta[cp.INDEX_NATIVE] == pytest.approx(0.1)
    assert delta[cp.NATIVE_OTHER] == pytest.approx(0.1)
    assert delta[cp.DEV_SERVER] == pytest.approx(3.0)
    assert delta["python"] == pytest.approx(2.0 - 0.6)
