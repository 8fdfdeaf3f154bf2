"""Per-phase clocks for the phase benches (bench/write_phases.py, bench/search_phases.py).

`wrap` replaces a function or coroutine function with one that records, in `MARKS`, the first time it
is entered and left (`name:start` / `name:end`); a bench clears `MARKS` before each request and reads
it after. The wrappers only read the clock, so a run measures the code that serves requests.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable
from typing import Any

MARKS: dict[str, float] = {}


def mark(name: str) -> None:
    MARKS.setdefault(name, time.perf_counter())  # the first entry of a request counts


def wrap(owner: Any, attr: str, name: str) -> None:
    """Replace `owner.attr` (a function or coroutine function) with one marking `name:start`/`name:end`."""
    original: Callable[..., Any] = getattr(owner, attr)
    if asyncio.iscoroutinefunction(original):

        @functools.wraps(original)
        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            mark(f"{name}:start")
            try:
                return await original(*args, **kwargs)
            finally:
                mark(f"{name}:end")

        setattr(owner, attr, timed_async)
        return

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        mark(f"{name}:start")
        try:
            return original(*args, **kwargs)
        finally:
            mark(f"{name}:end")

    setattr(owner, attr, timed)


def wrap_temporal() -> None:
    """Marks for Temporal's own steps on the path: the client's start (`client.start`), the wait for the
    result (`client.result`) and, on the worker, building the run's sandboxed instance (`sandbox`, a
    private method of the SDK's workflow worker: marked only where it exists), plus the claim checks
    parked before the start (`park`) and read back by the activity (`claims`)."""
    import temporalio.client as temporal_client
    import temporalio.worker._workflow as workflow_worker

    from memwarden.stores.sql import SqlStore

    wrap(temporal_client.Client, "start_workflow", "client.start")
    wrap(temporal_client.WorkflowHandle, "result", "client.result")
    if hasattr(workflow_worker, "_WorkflowWorker"):
        wrap(workflow_worker._WorkflowWorker, "_create_workflow_instance", "sandbox")
    wrap(SqlStore, "put_candidates", "park")
    wrap(SqlStore, "get_candidates", "claims")
