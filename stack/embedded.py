"""`memwarden up`: the embedded default in one process tree.

The Temporal dev server runs as a child process (its database in the data dir); the worker and
the API share this process and one Temporal client, so workflows start eagerly on the local
worker and only the worker opens the Qdrant Edge shard. Ctrl-C (or SIGTERM) stops all three.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Iterator

import uvicorn

from api.app import create_app
from memwarden import telemetry
from memwarden.config import Settings
from memwarden.file_modes import private_dir
from memwarden.temporal.client import connect
from stack.devserver import DevServer
from worker.runtime import build_worker, open_deps
from worker.schedules import ensure_schedules

log = logging.getLogger("memwarden.up")


class StackError(RuntimeError):
    """A part of `up` could not start (a busy port, say); `memwarden up` reports it without a traceback."""


class _Server(uvicorn.Server):
    """uvicorn without its own signal capture: the stack decides when everything stops."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def run_api(settings: Settings, server_holder: list[uvicorn.Server], app: object) -> None:
    config = uvicorn.Config(
        app,
        host=settings.api_host,
        port=settings.api_port,
        log_level="warning",  # type: ignore[arg-type]
        lifespan="on",
        access_log=False,
        proxy_headers=True,
        forwarded_allow_ips=settings.trusted_proxies,  # X-Forwarded-* from anyone else is ignored
    )
    server = _Server(config)
    server_holder.append(server)
    try:
        await server.serve()
    except SystemExit:
        # uvicorn calls sys.exit() when it cannot bind; an error instead lets `up` stop the other parts in order.
        raise StackError(f"the API could not listen on {settings.api_host}:{settings.api_port}") from None


async def up(settings: Settings, *, temporal_port: int, ui_port: int, headless: bool = False) -> None:
    private_dir(settings.data_dir)  # 0700: every memory, the keys and history live here
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    dev = DevServer(data_dir=settings.data_dir, port=temporal_port, ui_port=ui_port, headless=headless)
    await dev.start()
    telemetry.setup(settings)
    try:
        client = await connect(settings)
        await ensure_schedules(client, settings)
        async with open_deps(settings) as deps:
            worker = build_worker(client, deps)
            app = create_app(settings, temporal=client, store=deps.store)
            servers: list[uvicorn.Server] = []
            worker_task = asyncio.create_task(worker.run())
            api_task = asyncio.create_task(run_api(settings, servers, app))
            ui = "off" if headless else f"http://127.0.0.1:{ui_port}"
            print(
                f"memwarden up: API http://{settings.api_host}:{settings.api_port}  Temporal UI {ui}  "
                f"data {settings.data_dir.resolve()}",
                flush=True,
            )
            stop_task = asyncio.create_task(stop.wait())
            done, _ = await asyncio.wait({worker_task, api_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
            for server in servers:
                server.should_exit = True
            with contextlib.suppress(Exception):
                await asyncio.wait_for(api_task, 10)
            await worker.shutdown()
            with contextlib.suppress(Exception):
                await worker_task
            stop_task.cancel()
            for task in done:
                if task is not stop_task and task.exception() is not None:
                    raise task.exception()  # type: ignore[misc]
    finally:
        await dev.stop()
        print("memwarden up: stopped", flush=True)
