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
