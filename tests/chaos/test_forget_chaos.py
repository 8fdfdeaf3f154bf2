"""Chaos for Forget: the worker killed mid fan-out, a sink (Redis) stopped for 30 s, the dev server restarted.

Each time the deletion completes, every sink verifies, and nothing applies twice (one receipt in the
audit chain, sinks verified before the fault are not purged again). All real: the Temporal dev server,
the `memwarden worker` command as a child process (for kill -9), a redis-server of our own on a free
port (never the machine's), SQLite + Qdrant Edge, and in the Redis test PostgreSQL databases of our own
for the store and a replica. Bounded: each test waits at most a couple of minutes, in CI well under 3 min
together.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis
from temporalio.client import Client, WorkflowHandle

from memwarden.forget import OwnerSelector, redacted, selector_key, subject_key
from memwarden.records import ForgetInput, ForgetResult, Status
from memwarden.services.replicas import replicate
from memwarden.sinks import CACHE, STORE_CONTENT, SUMMARIES, VECTOR_INDEX
from memwarden.stores.cache import RedisCache, search_key
from memwarden.stores.forget import ForgetStore, SinkRow
from memwarden.stores.sql import SqlStore
from memwarden.temporal.client import connect
from stack.devserver import DevServer, free_port
from tests.conftest import service_url
from tests.e2e.harness import child_env, memwarden_exe
from tests.store_support import temporary_database
from tests.workflows.record_histories import TEST_CODEC_KEY, remember_input, run_remember, settings_for
from worker.runtime import build_worker, open_deps
from workflows.forget import ForgetWorkflow

OTHERS = {VECTOR_INDEX, STORE_CONTENT, SUMMARIES}


class RedisProcess:
    """A redis-server of this test's own, on a free port; `freeze` (SIGSTOP) makes it a dead sink."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            pytest.fail("redis-server is not installed")
        self.proc = subprocess.Popen(
            [
                exe,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.workdir),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                if redis.Redis(port=self.port, socket_timeout=0.5).ping():
                    return
            except redis.RedisError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def freeze(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)
            self.proc.terminate()
            self.proc.wait(timeout=10)


@pytest.fixture
def redis_proc(tmp_path: Path) -> Iterator[RedisProcess]:
    proc = RedisProcess(tmp_path)
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


async def seed_alice(client: Client, store: SqlStore, task_queue: str, tenant: str, n: int = 4) -> list[str]:
    ids = []
    for i in range(n):
        content = f"synthetic chaos memory {i}: alice likes route {i}"
        request = remember_input(str(uuid.uuid4()), content, tenant=tenant, owner="alice", actor="user:alice")
        await run_remember(client, store, task_queue, request, content, workflow_id=f"remember-{request.memory_id}")
        ids.append(request.memory_id)
    return ids


async def fill_cache(redis_url: str, tenant: str, n: int = 3) -> RedisCache:
    cache = RedisCache(redis_url)
    for i in range(n):
        await cache.set(search_key(tenant, "alice", f"{i:064x}", "e" * 64), b"[]", 600)
    return cache


async def start_forget(client: Client, store: SqlStore, task_queue: str, tenant: str) -> WorkflowHandle:
    """What `POST /v1/forget` does: tombstone in the store, then start the workflow."""
    selector = OwnerSelector(owner_id="alice")
    body = redacted(selector, subject_key("chaos-secret"), tenant)
    row, created = await ForgetStore(store).begin(
        tenant_id=tenant,
        requester="privacy:dpo",
        selector=selector,
        redacted_selector=body,
        selector_key=selector_key(tenant, body),
        reason="chaos",
        subject_hash=body["subject_hash"],
        now=datetime.now(UTC),
    )
    assert created
    return await client.start_workflow(
        ForgetWorkflow.run,
        ForgetInput(deletion_id=row.id, tenant_id=tenant),
        id=row.workflow_id or "",
        task_queue=task_queue,
        result_type=ForgetResult,
    )


async def sinks_of(store: SqlStore, deletion_id: str) -> dict[str, SinkRow]:
    return {s.name: s for s in await ForgetStore(store).sinks(deletion_id)}


async def until_others_verified(store: SqlStore, deletion_id: str, within: float = 90.0) -> dict[str, SinkRow]:
    """Wait for mid fan-out: every sink but the cache verified, the cache not."""
    deadline = time.monotonic() + within
    rows: dict[str, SinkRow] = {}
    while time.monotonic() < deadline:
        rows = await sinks_of(store, deletion_id)
        if all(rows.get(n) is not None and rows[n].status == "verified" for n in OTHERS):
            assert rows.get(CACHE) is None or rows[CACHE].status != "verified"
            return rows
        await asyncio.sleep(0.1)
    raise AssertionError(f"other sinks not verified in {within:.0f}s: {rows}")


async def assert_completed_once(store: SqlStore, tenant: str, deletion_id: str, ids: list[str]) -> None:
    row = await ForgetStore(store).get(tenant, deletion_id)
    assert row is not None and row.status == "verified" and row.receipt_hash
    rows = await sinks_of(store, deletion_id)
    assert all(r.status == "verified" and r.evidence and r.evidence["absent"] for r in rows.values()), rows
    events, _ = await store.list_audit(tenant, limit=50, cursor=None)
    receipts = [e for e in events if e.operation == "forget_receipt"]
    assert len(receipts) == 1 and receipts[0].details["receipt_hash"] == row.receipt_hash
    assert await store.verify_audit() == (True, None)
    for mid in ids:
        record = await store.get_memory(tenant, mid)
        assert record is not None and record.status is Status.PURGED and record.content is None


def start_worker(data_dir: Path, address: str, task_queue: str, redis_url: str, log: Path) -> subprocess.Popen[bytes]:
    env = child_env(
        MEMWARDEN_TEMPORAL_ADDRESS=address,
        MEMWARDEN_TEMPORAL_TASK_QUEUE=task_queue,
        MEMWARDEN_CODEC_KEY=TEST_CODEC_KEY,
        MEMWARDEN_CACHE_BACKEND="redis",
        MEMWARDEN_REDIS_URL=redis_url,
    )
    with open(log, "ab") as out:
        return subprocess.Popen(
            [memwarden_exe(), "worker", "--data-dir", str(data_dir)],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,
        )


def kill9(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


async def test_worker_killed_mid_fanout_then_restarted(tmp_path: Path, redis_proc: RedisProcess) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    task_queue = f"chaos-kill-{uuid.uuid4().hex[:8]}"
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    async with DevServer(tmp_path / "temporal", port=free_port(), headless=True) as dev:
        settings = settings_for(data_dir, dev.address, task_queue)
        store = await SqlStore.open(settings.database_url or "")
        await store.migrate()
        log = tmp_path / "worker.log"
        first = start_worker(data_dir, dev.address, task_queue, redis_proc.url, log)
        second: subprocess.Popen[bytes] | None = None
        try:
            client = await connect(settings)
            ids = await asyncio.wait_for(seed_alice(client, store, task_queue, tenant), 120)
            cache = await fill_cache(redis_proc.url, tenant)
            redis_proc.freeze()  # the cache sink cannot finish: the fan-out stays open
            handle = await start_forget(client, store, task_queue, tenant)
            before = await until_others_verified(store, handle.id.removeprefix("forget-"))
            kill9(first)
            redis_proc.thaw()
            second = start_worker(data_dir, dev.address, task_queue, redis_proc.url, log)
            result = await asyncio.wait_for(handle.result(), 150)
            deletion_id = result.deletion_id
            await assert_completed_once(store, tenant, deletion_id, ids)
            after = await sinks_of(store, deletion_id)
            for name in OTHERS:  # done before the kill: not purged again by the new worker
                assert after[name].attempts == before[name].attempts == 1, name
                assert after[name].verified_at == before[name].verified_at, name
            assert after[CACHE].attempts >= 1 and await cache.keys_with_prefix("search:") == []
            await cache.close()
        finally:
            kill9(first)
            if second is not None:
                second.send_signal(signal.SIGTERM)
                try:
                    second.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    kill9(second)
            await store.close()


@pytest.mark.postgres
@pytest.mark.redis
async def test_redis_stopped_for_30_seconds_delays_but_never_drops(tmp_path: Path, redis_proc: RedisProcess) -> None:
    pg = service_url("MEMWARDEN_TEST_POSTGRES_URL")
    task_queue = f"chaos-redis-{uuid.uuid4().hex[:8]}"
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    async with (
        temporary_database(pg, "mw_chaos") as db_url,
        temporary_database(pg, "mw_chaos") as replica_url,
        DevServer(tmp_path / "temporal", port=free_port(), headless=True) as dev,
    ):
        settings = settings_for(
            tmp_path / "data",
            dev.address,
            task_queue,
            database_url=db_url,
            cache_backend="redis",
            redis_url=redis_proc.url,
            replica_urls=[replica_url],
        )
        client = await connect(settings)
        async with open_deps(settings) as deps, build_worker(client, deps):
            ids = await seed_alice(client, deps.store, task_queue, tenant)
            for mid in ids:  # the commit path's replication step
                assert await replicate(deps, tenant, mid) == 1
            cache = await fill_cache(redis_proc.url, tenant)
            redis_proc.freeze()
            stopped = time.monotonic()
            handle = await start_forget(client, deps.store, task_queue, tenant)
            deletion_id = handle.id.removeprefix("forget-")
            rows = await until_others_verified(deps.store, deletion_id)
            assert deps.replicas[0].name in rows and rows[deps.replicas[0].name].status == "verified"
            await asyncio.sleep(max(0.0, 30 - (time.monotonic() - stopped)))
            row = await ForgetStore(deps.store).get(tenant, deletion_id)
            assert row is not None and row.status == "purging"  # delayed, not given up, not faked
            assert (await sinks_of(deps.store, deletion_id))[CACHE].status != "verified"
            redis_proc.thaw()
            await asyncio.wait_for(handle.result(), 90)
            await assert_completed_once(deps.store, tenant, deletion_id, ids)
            assert await cache.keys_with_prefix("search:") == []
            for mid in ids:
                copy = await deps.replicas[0].get(mid)
                assert copy is not None and copy["content"] is None
            await cache.close()


async def test_dev_server_restarted_on_its_db_file(tmp_path: Path, redis_proc: RedisProcess) -> None:
    data_dir = tmp_path / "data"
    task_queue = f"chaos-dev-{uuid.uuid4().hex[:8]}"
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    port = free_port()
    dev = DevServer(tmp_path / "temporal", port=port, headless=True)
    await dev.start()
    try:
        settings = settings_for(data_dir, dev.address, task_queue, cache_backend="redis", redis_url=redis_proc.url)
        client = await connect(settings)
        async with open_deps(settings) as deps, build_worker(client, deps):
            ids = await seed_alice(client, deps.store, task_queue, tenant)
            cache = await fill_cache(redis_proc.url, tenant)
            redis_proc.freeze()
            handle = await start_forget(client, deps.store, task_queue, tenant)
            deletion_id = handle.id.removeprefix("forget-")
            await until_others_verified(deps.store, deletion_id)
            await dev.stop()
            dev = DevServer(tmp_path / "temporal", port=port, headless=True)  # same db file, same port
            await dev.start()
            redis_proc.thaw()
            result = await asyncio.wait_for(handle.result(), 120)
            assert result.deletion_id == deletion_id
            await assert_completed_once(deps.store, tenant, deletion_id, ids)
            assert await cache.keys_with_prefix("search:") == []
            await cache.close()
    finally:
        await dev.stop()
