"""What the service tests share: real embedded stores under a test's tmp_path, a fixed clock, counted ids.

Not collected by pytest. No Temporal here: the services are called directly, with a `Run` the test
names, so each test asserts what a service decides and writes, and when it says it happened.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memwarden.config import Settings
from memwarden.embed import default_embedder
from memwarden.records import MemoryRecord, MemoryType, Scope, Sensitivity, SourceKind, SourceRef, Status, content_hash
from memwarden.services.deps import Deps
from memwarden.services.run import Run
from memwarden.stores.audit import AuditEvent
from memwarden.stores.cache import MemoryCache
from memwarden.stores.sources import SourceConfig, SourceRegistry
from memwarden.stores.vector_backends import open_index
from memwarden.stores.vectors import index_point
from tests.store_support import fresh_store

FIXED = datetime(2026, 6, 1, 9, 30, 15, tzinfo=UTC)
"""The instant the injected clock reads: far from the wall clock, so a time taken from the system shows."""

RUN = Run(workflow_id="wf-test", run_id="run-test")


class Clock:
    """A clock a test holds still and moves on by hand."""

    def __init__(self, at: datetime = FIXED) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at

    def advance(self, **delta: float) -> datetime:
        self.at += timedelta(**delta)
        return self.at


class Ids:
    """Ids `id-1`, `id-2`, ... in the order a service asks for them."""

    def __init__(self) -> None:
        self.issued: list[str] = []

    def __call__(self) -> str:
        self.issued.append(f"id-{len(self.issued) + 1}")
        return self.issued[-1]


@asynccontextmanager
async def service_deps(tmp_path: Path, *, sources: list[SourceConfig] | None = None) -> AsyncIterator[Deps]:
    """A SQLite file, a Qdrant Edge shard and an in-process cache under `tmp_path`, the real embedder,
    the fixed `Clock` and counted `Ids`."""
    settings = Settings(data_dir=tmp_path)  # type: ignore[call-arg]
    embedder = await asyncio.to_thread(default_embedder)
    registry = SourceRegistry(sources or [])
    async with fresh_store("sqlite", tmp_path) as store:
        index = open_index(settings)
        await index.ensure()
        try:
            yield Deps(
                settings=settings,
                store=store,
                index=index,
                cache=MemoryCache(),
                embedder=embedder,
                sources=registry,
                clock=Clock(),
                new_id=Ids(),
            )
        finally:
            await registry.close()
            await index.close()


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


async def audit_log(deps: Deps, tenant_id: str) -> list[AuditEvent]:
    events, _ = await deps.store.list_audit(tenant_id, limit=100, cursor=None, oldest_first=True)
    return list(events)


async def seed(
    deps: Deps,
    tenant_id: str,
    owner: str,
    content: str,
    *,
    source: SourceRef | None = None,
    type: MemoryType = MemoryType.FACT,
    at: datetime | None = None,
    expires_at: datetime | None = None,
) -> MemoryRecord:
    """A live memory committed and indexed as the commit path does it, written at `at` (default: the clock)."""
    now = at or deps.clock()
    record = MemoryRecord(
        id=str(uuid.uuid4()),
        tenant_id=tenant_id,
        owner_id=owner,
        scope=Scope.USER,
        type=type,
        content=content,
        content_hash=content_hash(content),
        source_kind=SourceKind.SYSTEM if source else SourceKind.USER,
        source_ref=source,
        reason="user_stated_fact",
        sensitivity=Sensitivity.LOW,
        status=Status.ACTIVE,
        expires_at=expires_at,
        last_confirmed_at=now,
        created_at=now,
        updated_at=now,
    )
    live, _ = await deps.store.commit_live(record)
    [dense] = await asyncio.to_thread(deps.embedder.embed, [content])
    await deps.index.upsert([index_point(live, dense)])
    return live
