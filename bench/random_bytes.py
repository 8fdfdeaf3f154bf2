"""os.urandom and uuid.uuid4 against memwarden.randomness, alone and beside a busy Python thread.

    .venv/bin/python -m bench.random_bytes [--n 2000]

Why: `os.urandom` releases the GIL around its syscall, so on an event loop that shares the GIL with
other Python threads (embedding, workflow activations) each call can wait for another thread's turn.
This measures that cost side by side in one run: microseconds per call with no other thread, then
with one thread running Python in a loop (what the stack's threads do in bursts).
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
import uuid
from collections.abc import Callable

from memwarden import randomness

CASES: dict[str, Callable[[], object]] = {
    "os.urandom(12)": lambda: os.urandom(12),
    "randomness.token_bytes(12)": lambda: randomness.token_bytes(12),
    "uuid.uuid4()": uuid.uuid4,
    "randomness.uuid4()": randomness.uuid4,
}


def per_call_us(fn: Callable[[], object], n: int) -> float:
    """Median of five timed batches, microseconds per call."""
    batches = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(n):
            fn()
        batches.append((time.perf_counter() - start) / n * 1e6)
    return statistics.median(batches)


def measure(n: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {"alone": {}, "beside a busy thread": {}}
    for name, fn in CASES.items():
        out["alone"][name] = round(per_call_us(fn, n), 2)
    stop = threading.Event()

    def busy() -> None:
        x = 0
        while not stop.is_set():
            x += 1

    thread = threading.Thread(target=busy, daemon=True)
    thread.start()
    try:
        for name, fn in CASES.items():
            out["beside a busy thread"][name] = round(per_call_us(fn, n), 2)
    finally:
        stop.set()
        thread.join()
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=2000)
    results = measure(parser.parse_args().n)
    print("| call | alone, us | beside a busy thread, us |")
    print("|---|---|---|")
    for name in CASES:
        print(f"| `{name}` | {results['alone'][name]} | {results['beside a busy thread'][name]} |")
