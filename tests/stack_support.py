"""One embedded stack in this process, as `memwarden up` wires it, for the integration tests that share it.

Not collected by pytest (no `test` prefix). Everything is real: the Temporal dev server (child
process, its db in the data dir), the production worker over SQLite + Qdrant Edge + the in-process
cache (or what `settings` say), and the API under uvicorn on a free port.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from opentelemetry.sdk.trace.export import SpanExporter
from temporalio.client import Client

from api.app import create_app
from memwarden import telemetry
from memwarden.config import Settings
from memwarden.identity import mint_token
from memwarden.services.deps import Deps
from memwarden.temporal.client import connect
from stack.devserver import DevServer, free_port
from stack.embedded import run_api
from worker.runtime import build_worker, open_deps


@dataclass
class Stack:
    base_url: str
    settings: Settings
    deps: Deps
    dev: DevServer
    client: Client

    def auth(self, tenant: str, sub: str, role: str = "user", **claims: Any) -> dict[str, str]:
        token = mint_token(self.settings.auth_secret_value, tenant=tenant, sub=sub, role=role, **claims)
        return {"Authorization": f"Bearer {token}"}


@asynccontextmanager
async def embedded_stack(
    data_dir: Path,
    *,
    span_exporter: SpanExporter | None = None,
    dev_dir: Path | None = None,
    **overrides: Any,
) -> AsyncIterator[Stack]:
    """Dev server, worker and API, all with their state under `data_dir` (as `memwarden up` lays it out).

    `span_exporter` installs the SDK's exporter (tests reading span trees) before anything is traced;
    `dev_dir` puts the dev server's database elsewhere (default: the data dir, as `memwarden up` does).
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    dev = DevServer(dev_dir or data_dir, port=free_port(), headless=True)
    await dev.start()
    try:
        values: dict[str, Any] = {
            "profile": "embedded",
            "data_dir": data_dir,
            "temporal_address": dev.address,
            "temporal_task_queue": f"stack-{uuid.uuid4().hex[:8]}",
            "api_port": free_port(),
        }
        values.update(overrides)
        settings = Settings(**values)
        if span_exporter is not None:
            telemetry.setup(settings, span_exporter=span_exporter)
        client = await connect(settings)
        async with open_deps(settings) as deps:
            app = create_app(settings, temporal=client, store=deps.store)
            async with build_worker(client, deps):
                servers: list[uvicorn.Server] = []
                serving = asyncio.create_task(run_api(settings, servers, app))
                deadline = time.monotonic() + 30
                while not (servers and servers[0].started):
                    assert not serving.done(), "uvicorn stopped during startup"
                    assert time.monotonic() < deadline, "uvicorn did not start"
                    await asyncio.sleep(0.05)
                try:
                    yield Stack(f"http://127.0.0.1:{settings.api_port}", settings, deps, dev, client)
                finally:
                    servers[0].should_exit = True
                    await asyncio.wait_for(serving, 15)
    finally:
        await dev.stop()
