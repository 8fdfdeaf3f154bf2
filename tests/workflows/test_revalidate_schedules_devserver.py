"""The Schedules, on the dev server (the time-skipping server has no Schedules): created idempotently, and
each one really runs: periodic revalidation of volatile memories, and the expiry sweep with retention classes.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from temporalio.client import Client

from memwarden.config import Settings
from memwarden.policy.retention import RetentionClass
from memwarden.records import MemoryRecord, MemoryType, SourceKind, SourceRef, Status, content_hash
from memwarden.services.deps import Deps
from memwarden.stores.vectors import index_point
from memwarden.temporal.client import connect
from stack.devserver import DevServer, free_port
from tests.source_server import SourceServer, sources_toml
from worker.runtime import build_worker, open_deps
from worker.schedules import RETENTION_SCHEDULE_ID, REVALIDATION_SCHEDULE_ID, ensure_schedules

SWEEP_SECONDS = 2


@dataclass
class Stack:
    client: Client
    deps: Deps
    settings: Settings
    src: SourceServer


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    data_dir = Path(tmp_path_factory.mktemp("schedules"))
    with SourceServer() as src:
        (data_dir / "sources.toml").write_text(
            sources_toml("ledger", src.url, timeout_ms=500, volatile=True)
            + sources_toml("catalog", src.url, timeout_ms=500)
        )
        dev = DevServer(data_dir / "temporal", port=free_port(), headless=True)
        await dev.start()
        try:
            settings = Settings(
                profile="embedded",  # type: ignore[arg-type]
                data_dir=data_dir,
                temporal_address=dev.address,
                temporal_task_queue=f"schedules-{uuid.uuid4().hex[:8]}",
                revalidation_sweep_seconds=SWEEP_SECONDS,
                retention_sweep_seconds=SWEEP_SECONDS,
                retention_classes={
                    "standard": RetentionClass(),
                    "legal_hold": RetentionClass(hold=True),
                    "short": RetentionClass(max_age_days=1),
                },
            )
            client = await connect(settings)
            async with open_deps(settings) as deps, build_worker(client, deps):
                yield Stack(client, deps, settings, src)
        finally:
            await dev.stop()


async def put(
    stack: Stack, content: str, *, key: str | None = None, system: str = "ledger", **fields: object
) -> MemoryRecord:
    now = datetime.now(UTC)
    record = MemoryRecord(
        id=str(uuid.uuid4()),
        tenant_id="t-schedules",
        owner_id="alice",
        type=fields.pop("type", MemoryType.FACT),  # type: ignore[arg-type]
        content=content,
        content_hash=content_hash(content),
        source_kind=SourceKind.USER,
        source_ref=SourceRef(system=system, key=key, version="v1") if key else None,
        reason="user_stated_fact",
        created_at=fields.pop("created_at", now),  # type: ignore[arg-type]
        updated_at=now,
        last_confirmed_at=fields.pop("last_confirmed_at", now),  # type: ignore[arg-type]
        **fields,  # type: ignore[arg-type]
    )
    await stack.deps.store.insert_memory(record)
    [dense] = await asyncio.to_thread(stack.deps.embedder.embed, [content])
    await stack.deps.index.upsert([index_point(record, dense)])
    return record


async def status_of(stack: Stack, record: MemoryRecord) -> MemoryRecord:
    found = await stack.deps.store.get_memory(record.tenant_id, record.id)
    assert found is not None
    return found


async def test_schedules_are_created_idempotently_and_both_run(stack: Stack) -> None:
    hour_ago = datetime.now(UTC) - timedelta(hours=1)
    stack.src.put("bal-1", "synthetic: the studio account balance is 40", "v2")  # moved since v1
    stack.src.put("cat-1", "synthetic: catalogue item 7 is a blue vase", "v2")
    stack.src.put("task-1", "synthetic: glaze order is in progress", "v1")
    volatile = await put(stack, "synthetic: the studio account balance is 25", key="bal-1", last_confirmed_at=hour_ago)
    steady = await put(
        stack, "synthetic: catalogue item 7 is a green vase", key="cat-1", system="catalog", last_confirmed_at=hour_ago
    )
    task = await put(
        stack,
        "synthetic: glaze order is in progress",
        key="task-1",
        system="catalog",
        type=MemoryType.TASK,
        last_confirmed_at=hour_ago,
    )
    past = datetime.now(UTC) - timedelta(seconds=5)
    lapsed = await put(stack, "synthetic: the kiln slot on friday", expires_at=past, type=MemoryType.TASK)
    held = await put(stack, "synthetic: the incident note", expires_at=past, retention_class="legal_hold")
    aged = await put(
        stack, "synthetic: an old note", created_at=datetime.now(UTC) - timedelta(days=2), retention_class="short"
    )
    young = await put(stack, "synthetic: a new note", retention_class="short")

    created = await ensure_schedules(stack.client, stack.settings)  # what the worker does at start
    again = await ensure_schedules(stack.client, stack.settings)  # a second worker, or a restart
    assert created == {RETENTION_SCHEDULE_ID: True, REVALIDATION_SCHEDULE_ID: True}
    assert again == {RETENTION_SCHEDULE_ID: False, REVALIDATION_SCHEDULE_ID: False}
    try:
        for schedule_id in (RETENTION_SCHEDULE_ID, REVALIDATION_SCHEDULE_ID):
            described = await stack.client.get_schedule_handle(schedule_id).describe()
            assert described.schedule.spec.intervals[0].every == timedelta(seconds=SWEEP_SECONDS)

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            v, a, lp = await status_of(stack, volatile), await status_of(stack, aged), await status_of(stack, lapsed)
            t = await status_of(stack, task)
            if (
                v.status is Status.SUPERSEDED
                and lp.purged_at is not None
                and a.purged_at is not None
                and t.last_confirmed_at is not None
                and t.last_confirmed_at > hour_ago
            ):
                break
            await asyncio.sleep(0.5)
        else:
            pytest.fail("the schedules did not revalidate and expire in time")

        # periodic revalidation: the volatile source's changed value superseded the memory; the task
        # (a volatile type) was confirmed; the steady source's memory was not touched by the sweep.
        v = await status_of(stack, volatile)
        assert v.superseded_by is not None
        successor = await stack.deps.store.get_memory(volatile.tenant_id, v.superseded_by)
        assert successor is not None and successor.content == "synthetic: the studio account balance is 40"
        s = await status_of(stack, steady)
        assert s.status is Status.ACTIVE and s.last_confirmed_at == hour_ago and s.content == steady.content
        # the expiry sweep: expired -> `expired` and purged through Forget; classes decide the rest
        for record in (lapsed, aged):
            gone = await status_of(stack, record)
            assert gone.status is Status.EXPIRED and gone.content is None
        assert (await status_of(stack, held)).status is Status.ACTIVE  # a legal hold never expires by age
        assert (await status_of(stack, young)).status is Status.ACTIVE
        runs = [w async for w in stack.client.list_workflows("WorkflowType = 'PeriodicRevalidationWorkflow'")]
        assert runs, "the revalidation schedule started no workflow"
    finally:
        for schedule_id in (RETENTION_SCHEDULE_ID, REVALIDATION_SCHEDULE_ID):
            await stack.client.get_schedule_handle(schedule_id).delete()
