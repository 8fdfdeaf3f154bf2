"""`memwarden worker`: the production worker process."""

from __future__ import annotations

import asyncio
import signal

from memwarden.config import Settings
from worker.runtime import build_worker, open_deps
from worker.temporal_client import connect


async def run_worker(settings: Settings) -> None:
    """Run until SIGINT/SIGTERM, then finish in-flight tasks and close the stores."""
    client = await connect(settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with open_deps(settings) as deps:
        worker = build_worker(client, deps)
        async with worker:
            await stop.wait()
