"""Helpers the Forget tests share: an embedded stack in this process, seeding, polling, the disk scan.

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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from temporalio.client import Client

from activities.deps import Deps
from api.app import create_app
from memwarden.config import Settings
from memwarden.identity import mint_token
from memwarden.records import (
    MemoryRecord,
    MemoryType,
    Scope,
    Sensitivity,
    SourceKind,
    SourceRef,
    Status,
    content_hash,
)
from memwarden.stores.vectors import index_point
from worker.devserver import DevServer, free_port
from worker.runtime import build_worker, open_deps
from worker.stack import run_api
from worker.temporal_client import connect


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
async def embedded_stack(data_dir: Path, **overrides: Any) -> AsyncIterator[Stack]:
    """Dev server, worker and API, all with their state under `data_dir` (as `memwarden up` lays it out)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    dev = DevServer(data_dir, port=free_port(), headless=True)
    await dev.start()
    try:
        values: dict[str, Any] = {
            "profile": "embedded",
            "data_dir": data_dir,
            "temporal_address": dev.address,
            "temporal_task_queue": f"forget-{uuid.uuid4().hex[:8]}",
            "api_port": free_port(),
        }
        values.update(overrides)
        settings = Settings(**values)
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


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


async def seed(
    deps: Deps,
    tenant_id: str,
    owner: str,
    content: str,
    *,
    slot: str | None = None,
    scope: Scope = Scope.USER,
    agent_id: str | None = None,
    type: MemoryType = MemoryType.PREFERENCE,
    source_ref: SourceRef | None = None,
    expires_in: timedelta | None = None,
    replicate: bool = True,
) -> MemoryRecord:
    """Commit as the commit path does: durable store (superseding the slot's holder), index, replicas."""
    from activities.replicas import replicate as copy_to_replicas

    now = datetime.now(UTC)
    record = MemoryRecord(
        id=str(uuid.uuid4()),
        tenant_id=tenant_id,
        owner_id=owner,
        scope=scope,
        agent_id=agent_id,
        type=type,
        slot=slot,
        content=content,
        content_hash=content_hash(content),
        source_kind=SourceKind.SYSTEM if source_ref else SourceKind.USER,
        source_ref=source_ref,
        reason="user_stated_fact",
        sensitivity=Sensitivity.LOW,
        status=Status.ACTIVE,
        expires_at=now + expires_in if expires_in else None,
        created_at=now,
        updated_at=now,
    )
    live, _ = await deps.store.commit_live(record)
    [dense] = await asyncio.to_thread(deps.embedder.embed, [content])
    await deps.index.upsert([index_point(live, dense)])
    if replicate:
        await copy_to_replicas(deps, tenant_id, live.id)
    return live


async def wait_verified(
    http: httpx.AsyncClient, deletion_id: str, headers: dict[str, str], within: float = 90.0
) -> dict[str, Any]:
    """Poll the receipt until `verified`; fail with the last receipt if it does not get there."""
    deadline = time.monotonic() + within
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        answer = await http.get(f"/v1/deletions/{deletion_id}", headers=headers)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        if body["status"] == "verified":
            return body
        await asyncio.sleep(0.2)
    raise AssertionError(f"deletion {deletion_id} not verified in {within:.0f}s: {body}")


def scan(root: Path, needle: bytes) -> list[str]:
    """Every file under `root` whose bytes contain `needle` (the whole file, every byte)."""
    hits: list[str] = []
    for path in sorted(root.rglob("*")):
        if path.is_file():
            try:
                data = path.read_bytes()
            except OSError:
                continue
            if needle in data:
                hits.append(str(path.relative_to(root)))
    return hits


async def decoded_histories_containing(client: Client, needle: bytes) -> list[str]:
    """Workflow ids whose history, *decoded with the codec key*, holds `needle` in any payload.

    Raw bytes prove nothing about encrypted history (the key sits in the data dir); this reads every
    history of the namespace the way an operator with the key would.
    """
    import base64

    from temporalio.api.common.v1 import Payload

    codec = client.data_converter.payload_codec
    assert codec is not None
    found: list[str] = []

    def payloads(node: object) -> list[Payload]:
        out: list[Payload] = []
        if isinstance(node, dict):
            if "data" in node and isinstance(node.get("metadata"), dict):
                meta = {k: base64.b64decode(v) for k, v in node["metadata"].items()}
                out.append(Payload(metadata=meta, data=base64.b64decode(node.get("data", ""))))
            for value in node.values():
                out += payloads(value)
        elif isinstance(node, list):
            for value in node:
                out += payloads(value)
        return out

    async for execution in client.list_workflows():
        history = await client.get_workflow_handle(execution.id, run_id=execution.run_id).fetch_history()
        decoded = await codec.decode(payloads(history.to_json_dict()))
        if any(needle in p.data or needle in p.SerializeToString() for p in decoded):
            found.append(execution.id)
    return found
