"""One embedded stack for the API tests of a module, over real HTTP, and the helpers they share.

In this process: the Temporal dev server (child process), the worker over SQLite + Qdrant Edge, and
the API under uvicorn on a free port, the same pieces `memwarden up` wires together. Tests use their
own tenants, so they do not see each other's data.
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

import httpx
import uvicorn

from api.app import create_app
from memwarden.config import Settings
from memwarden.identity import mint_token
from memwarden.stores.sql import SqlStore
from worker.devserver import DevServer, free_port
from worker.runtime import build_worker, open_deps
from worker.stack import run_api
from worker.temporal_client import connect

PROBLEM = "application/problem+json"
MEMORY = {"content": "Prefers tea to coffee", "type": "preference", "source_kind": "user", "reason": "user_stated_fact"}


@dataclass
class Api:
    base_url: str
    settings: Settings
    store: SqlStore

    def token(self, tenant: str, sub: str, role: str = "user", **claims: Any) -> str:
        return mint_token(self.settings.auth_secret_value, tenant=tenant, sub=sub, role=role, **claims)

    def auth(self, tenant: str, sub: str, role: str = "user", **claims: Any) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(tenant, sub, role, **claims)}"}


@asynccontextmanager
async def embedded_api(data_dir: Path, **overrides: Any) -> AsyncIterator[Api]:
    """Dev server, worker and API under uvicorn, all torn down on exit."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    dev = DevServer(data_dir, port=free_port(), headless=True)
    await dev.start()
    try:
        settings = Settings(
            profile="embedded",  # type: ignore[arg-type]
            data_dir=data_dir,
            temporal_address=dev.address,
            temporal_task_queue=f"api-{uuid.uuid4().hex[:8]}",
            api_port=free_port(),
            **overrides,
        )
        client = await connect(settings)
        async with open_deps(settings) as deps:
            app = create_app(settings, temporal=client, store=deps.store, prepared=deps.prepared)
            async with build_worker(client, deps):
                servers: list[uvicorn.Server] = []
                serving = asyncio.create_task(run_api(settings, servers, app))
                deadline = time.monotonic() + 30
                while not (servers and servers[0].started):
                    assert not serving.done(), "uvicorn stopped during startup"
                    assert time.monotonic() < deadline, "uvicorn did not start"
                    await asyncio.sleep(0.05)
                try:
                    yield Api(f"http://127.0.0.1:{settings.api_port}", settings, deps.store)
                finally:
                    servers[0].should_exit = True
                    await asyncio.wait_for(serving, 15)
    finally:
        await dev.stop()


def assert_problem(
    response: httpx.Response, status: int, *, field: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """RFC 9457 shape, the status in the body matching the line, and the field at fault when named."""
    assert response.status_code == status, f"{response.status_code}: {response.text[:500]}"
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    for key in ("type", "title", "detail"):
        assert isinstance(body.get(key), str) and body[key], f"problem without {key}: {body}"
    assert body["status"] == status
    assert body["type"].startswith("urn:memwarden:problem:")
    if code is not None:
        assert body["code"] == code, body
    if field is not None:
        fields = [e["field"] for e in body.get("errors", [])]
        assert field in fields, f"{field!r} not among the fields at fault {fields}"
    return body  # type: ignore[no-any-return]


async def remember(http: httpx.AsyncClient, headers: dict[str, str], **fields: Any) -> dict[str, Any]:
    answer = await http.post("/v1/memories", headers=headers, json=MEMORY | fields)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]
