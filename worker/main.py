"""`memwarden worker`: the production worker process."""

from __future__ import annotations

import asyncio
import signal

from memwarden import telemetry
from memwarden.config import Settings
from memwarden.temporal.client import connect
from worker.health import HealthServer
from worker.runtime import build_worker, open_deps
from worker.schedules import ensure_schedules


async def run_worker(settings: Settings) -> None:
    """Run until SIGINT/SIGTERM, then finish in-flight tasks and close the stores.

    With `worker_health_port` set, /healthz and /readyz listen there once the stores are open.
    """
    telemetry.setup(settings)
    client = await connect(settings)
    await ensure_schedules(client, settings)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with open_deps(settings) as deps:
        worker = build_worker(client, deps)
        health = None
        if settings.worker_health_port is not None:
            health = HealthServer(client, deps, host=settings.worker_health_host, port=settings.worker_health_port)
            await health.start()
        try:
            async with worker:
                await stop.wait()
        finally:
            if health is not None:
                await health.stop()
