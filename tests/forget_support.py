"""Helpers the Forget tests share: seeding, polling a receipt, the disk scan, the history scan.

Not collected by pytest (no `test` prefix). The embedded stack itself lives in `tests.stack_support`
(re-exported here), shared with the search API tests.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client

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
from memwarden.services.deps import Deps
from memwarden.stores.vectors import index_point
from tests.stack_support import Stack, embedded_stack

__all__ = [
    "Stack",
    "an_hour_ago",
    "decoded_histories_containing",
    "embedded_stack",
    "scan",
    "seed",
    "tenant",
    "wait_verified",
]


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def an_hour_ago() -> datetime:
    """A write time for `seed(at=...)`: with `expires_in` of a second, the memory lapsed long before the sweep."""
    return datetime.now(UTC) - timedelta(hours=1)


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
    at: datetime | None = None,
) -> MemoryRecord:
    """Commit as the commit path does: durable store (superseding the slot's holder), index, replicas.

    `at` is when the memory was written (default: now). A past `at` with a short `expires_in` gives a
    memory whose expiry has already lapsed, so a test sweeps it at once instead of waiting out its TTL.
    """
    from memwarden.services.replicas import replicate as copy_to_replicas

    now = at or datetime.now(UTC)
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
