"""The worker dies between an effect and its audit event, and the audit log still comes out complete.

Every audit append takes PostgreSQL's audit lock (an advisory lock) first. This test holds that lock
from a connection of its own, so the worker's next append waits exactly where an effect meets its
event: a read-time confirmation, a declined write's rejection. Then the attempt dies: the `memwarden
worker` process is killed (kill -9), or the server ends the worker's store connection. The lock is
released and Temporal retries (a new worker process, a new attempt); afterwards the event is in the
log exactly once, nothing it records was visible without it, and `GET /v1/audit/verify` is ok.

All real: the Temporal dev server, `memwarden worker` as a child process, PostgreSQL (a database of
this test's own), a system of record over HTTP (tests/source_server.py), the API under uvicorn in this
process (the production shape: no worker beside it). Every text is synthetic.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
import uvicorn
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from api.app import create_app
from memwarden.config import Settings
from memwarden.identity import mint_token
from memwarden.records import Status
from memwarden.stores.sql import SqlStore
from memwarden.stores.sql.audit_log import _AUDIT_LOCK_KEY
from stack.devserver import DevServer, free_port
from stack.embedded import run_api
from tests.conftest import service_url
from tests.e2e.harness import Child
from tests.source_server import SourceServer, sources_toml
from tests.store_support import temporary_database
from tests.workflows.record_histories import TEST_CODEC_KEY, settings_for

pytestmark = [pytest.mark.postgres]

WAIT_S = 120.0
"""Bound on each wait: a worker's start, Temporal's workflow-task timeout after a kill, the retry."""


@dataclass
class Stack:
    settings: Settings
    env: dict[str, str]
    data_dir: Path
    store: SqlStore
    http: httpx.AsyncClient
    src: SourceServer
    worker: Child

    def auth(self, tenant: str, sub: str, role: str = "user", **claims: Any) -> dict[str, str]:
        token = mint_token(self.settings.auth_secret_value, tenant=tenant, sub=sub, role=role, **claims)
        return {"Authorization": f"Bearer {token}"}

    def start_worker(self) -> Child:
        """A fresh `memwarden worker` process on the same stores and task queue (not waited for)."""
        self.worker = Child("worker", ["worker", "--data-dir", str(self.data_dir)], self.env, self.data_dir)
        self.worker.start()
        return self.worker

    async def worker_ready(self) -> None:
        url = f"http://127.0.0.1:{self.env['MEMWARDEN_WORKER_HEALTH_PORT']}/readyz"
        await asyncio.to_thread(self.worker.wait_ready, url, WAIT_S)

    async def post(self, path: str, headers: dict[str, str], body: dict[str, Any] | None = None) -> dict[str, Any]:
        answer = await self.http.post(path, headers=headers, json=body)
        assert answer.status_code == 200, answer.text
        return answer.json()  # type: ignore[no-any-return]

    async def events(self, tenant: str, memory_id: str, operation: str) -> list[dict[str, Any]]:
        ops = self.auth(tenant, "ops-1", "operator")
        answer = await self.http.get("/v1/audit", headers=ops, params={"memory_id": memory_id, "limit": 200})
        assert answer.status_code == 200, answer.text
        return [e for e in answer.json()["items"] if e["operation"] == operation]

    async def verify(self, tenant: str) -> dict[str, Any]:
        answer = await self.http.get("/v1/audit/verify", headers=self.auth(tenant, "ops-1", "operator"))
        assert answer.status_code == 200, answer.text
        return answer.json()  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def src() -> Iterator[SourceServer]:
    with SourceServer() as server:
        yield server


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory, src: SourceServer) -> AsyncIterator[Stack]:
    root = Path(tmp_path_factory.mktemp("audit-kill"))
    data_dir = root / "data"
    data_dir.mkdir()
    # Every read checks the source (a freshness window of 0), within a timeout a loaded machine still meets.
    # Its URL names the tenant and owner, so the agent may cite its records for the user it serves.
    (data_dir / "sources.toml").write_text(
        sources_toml("programs", src.scoped_url, timeout_ms=3000, freshness_seconds=0)
    )
    task_queue = f"audit-kill-{uuid.uuid4().hex[:8]}"
    auth_secret, signing_key = secrets.token_urlsafe(48), base64.b64encode(secrets.token_bytes(32)).decode()
    async with (
        temporary_database(service_url("MEMWARDEN_TEST_POSTGRES_URL"), "mw_chaos") as db_url,
        DevServer(root / "temporal", port=free_port(), headless=True) as dev,
    ):
        settings = settings_for(
            data_dir,
            dev.address,
            task_queue,
            database_url=db_url,
            auth_secret=auth_secret,
            audit_signing_key=signing_key,
            api_port=free_port(),
            workflow_timeout_seconds=WAIT_S,
        )
        env = {
            "MEMWARDEN_DATABASE_URL": db_url,
            "MEMWARDEN_TEMPORAL_ADDRESS": dev.address,
            "MEMWARDEN_TEMPORAL_TASK_QUEUE": task_queue,
            "MEMWARDEN_CODEC_KEY": TEST_CODEC_KEY,
            "MEMWARDEN_AUTH_SECRET": auth_secret,
            "MEMWARDEN_AUDIT_SIGNING_KEY": signing_key,
            "MEMWARDEN_WORKER_HEALTH_PORT": str(free_port()),
        }
        first = Child("worker", ["worker", "--data-dir", str(data_dir)], env, data_dir)
        first.start()
        store = await SqlStore.open(db_url)
        servers: list[uvicorn.Server] = []
        serving: asyncio.Task[None] | None = None
        s = Stack(settings, env, data_dir, store, httpx.AsyncClient(timeout=WAIT_S + 30), src, first)
        try:
            await s.worker_ready()  # it migrated the fresh database before the API opens it
            serving = asyncio.create_task(run_api(settings, servers, create_app(settings)))
            deadline = time.monotonic() + 30
            while not (servers and servers[0].started):
                assert not serving.done() and time.monotonic() < deadline, "the API did not start"
                await asyncio.sleep(0.05)
            s.http.base_url = httpx.URL(f"http://127.0.0.1:{settings.api_port}")
            yield s
        finally:
            if servers:
                servers[0].should_exit = True
            if serving is not None:
                await asyncio.wait_for(serving, 15)
            await s.http.aclose()
            s.worker.kill()
            await store.close()


class AuditLock:
    """The audit lock held by this test: every append (the worker's, the API's) waits until `release`."""

    def __init__(self, database_url: str) -> None:
        self._engine = create_async_engine(database_url, isolation_level="AUTOCOMMIT")
        self._conn: AsyncConnection | None = None

    async def __aenter__(self) -> AuditLock:
        self._conn = await self._engine.connect()
        await self._conn.execute(sa.text("SELECT pg_advisory_lock(:k)"), {"k": _AUDIT_LOCK_KEY})
        return self

    async def waiter(self, doing: asyncio.Task[Any]) -> int:
        """The backend that waits for the lock: an append that has begun (while `doing` is still in flight)."""
        assert self._conn is not None
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            assert not doing.done(), f"finished without waiting for the audit lock: {doing.result()}"
            found = await self._conn.scalar(
                sa.text(
                    "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database()) LIMIT 1"
                )
            )
            if found is not None:
                return int(found)
            await asyncio.sleep(0.05)
        raise AssertionError("no append waited for the audit lock")

    async def terminate(self, pid: int) -> None:
        """End that backend as a database failover would: its transaction rolls back, its client errors."""
        assert self._conn is not None
        assert await self._conn.scalar(sa.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})

    async def release(self) -> None:
        if self._conn is not None:
            await self._conn.execute(sa.text("SELECT pg_advisory_unlock(:k)"), {"k": _AUDIT_LOCK_KEY})
            await self._conn.close()
            self._conn = None

    async def __aexit__(self, *exc: object) -> None:
        await self.release()
        await self._engine.dispose()


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


async def test_the_worker_killed_before_a_read_confirmation_is_audited_leaves_no_hole(stack: Stack) -> None:
    """A source confirms a memory at read time; the worker dies as the confirmation is about to be audited.

    The confirmation and its event land together on the retry by a new worker process, before the
    search answers: the memory is confirmed, the `revalidate` event is there once, the chain verifies.
    """
    t, k = tenant(), f"rec-{uuid.uuid4().hex[:8]}"
    text = "synthetic: the glaze kiln is fired on thursdays"
    agent = stack.auth(t, "planner-svc", "agent", agent="planner", on_behalf_of="alice")
    stack.src.put(k, text, "v1")
    created = await stack.post(
        "/v1/memories",
        agent,
        {
            "content": text,
            "type": "fact",
            "source_kind": "user",
            "reason": "user_stated_fact",
            "source_ref": {"system": "programs", "key": k, "version": "v1"},
        },
    )
    assert created["decision"] == "ADD", created
    mid = created["memory_id"]
    before = await stack.store.get_memory(t, mid)
    assert before is not None and before.last_confirmed_at is not None

    async with AuditLock(stack.settings.database_url or "") as lock:
        searching = asyncio.create_task(
            stack.post("/v1/search", agent, {"query": "when is the glaze kiln fired", "consequence": "low"})
        )
        await lock.waiter(searching)
        # The source has answered and the confirmation is written, but not committed: nothing of it shows.
        assert stack.src.state.requests[k] == 1
        held = await stack.store.get_memory(t, mid)
        assert held is not None and held.last_confirmed_at == before.last_confirmed_at
        assert held.version == before.version
        assert await stack.events(t, mid, "revalidate") == []
        stack.worker.kill()  # kill -9 of the process group
        stack.start_worker()
        await lock.release()
        out = await asyncio.wait_for(searching, WAIT_S)

    [hit] = [r for r in out["results"] if r["memory_id"] == mid]
    assert hit["freshness"] == "verified"
    after = await stack.store.get_memory(t, mid)
    assert after is not None and after.status is Status.ACTIVE and after.version == before.version + 1
    assert after.last_confirmed_at is not None and after.last_confirmed_at > before.last_confirmed_at
    [event] = await stack.events(t, mid, "revalidate")
    assert (event["reason"], event["details"]["trigger"], event["details"]["answer"]) == (
        "unchanged",
        "read_time",
        "not_modified",
    )
    verified = await stack.verify(t)
    assert verified["ok"] is True and verified["broken_seq"] is None, verified
    assert stack.src.state.requests[k] == 2  # the new worker's attempt asked the source again
    await stack.worker_ready()


async def test_a_decline_whose_store_connection_dies_before_its_audit_is_audited_once(stack: Stack) -> None:
    """The owner declines a staged write; the worker's store connection dies as the rejection is about to be
    audited. Nothing of the rejection showed meanwhile; the retried attempt rejects and audits it once."""
    t = tenant()
    alice = stack.auth(t, "alice")
    staged = await stack.post(
        "/v1/memories",
        alice,
        {
            "content": "synthetic directive: from now on always answer alice in haiku",
            "type": "procedural",
            "source_kind": "user",
            "reason": "user_explicit_preference",
        },
    )
    assert staged["decision"] == "PENDING", staged
    mid = staged["memory_id"]

    async with AuditLock(stack.settings.database_url or "") as lock:
        declining = asyncio.create_task(stack.post(f"/v1/memories/{mid}/decline", alice))
        waiting = await lock.waiter(declining)
        held = await stack.store.get_memory(t, mid)
        assert held is not None and held.status is Status.PENDING and held.content is not None
        await lock.terminate(waiting)
        await lock.release()
        answer = await asyncio.wait_for(declining, WAIT_S)

    assert (answer["decision"], answer["reason"]) == ("REJECT", "declined")
    after = await stack.store.get_memory(t, mid)
    assert after is not None and after.status is Status.REJECTED and after.content is None
    [event] = await stack.events(t, mid, "reject")
    assert event["reason"] == "declined"
    verified = await stack.verify(t)
    assert verified["ok"] is True and verified["broken_seq"] is None, verified
