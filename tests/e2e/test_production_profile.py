"""The production profile, for real: `memwarden worker` and `memwarden api` as two processes,
configured only by MEMWARDEN_* variables, on this machine's PostgreSQL (a database of our own,
dropped afterwards) and Redis (db 15 under a key namespace of our own), with a Temporal dev server
standing in for the cluster and qdrant-client's local mode on a path standing in for the Qdrant
server. Only the Temporal and Qdrant *servers* are stand-ins; every memwarden code path is the
production one (asyncpg, the qdrant backend, the Redis cache, secrets from the environment).

qdrant-client's local mode on a path is single-process (it holds an exclusive lock file), so, as
in production, only the worker opens the index; the test checks the API process never does.
"""

from __future__ import annotations

import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis.asyncio as aioredis
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from memwarden.stores.cache import owner_prefix
from stack.devserver import DevServer, free_port
from tests.e2e.harness import Child, mint, production_secrets

pytestmark = [
    pytest.mark.postgres,
    pytest.mark.redis,
    pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="process checks read /proc"),
]

TENANT = f"prod-e2e-{uuid.uuid4().hex[:8]}"
CONTENT = "Alice prefers aisle seats on short flights"


@dataclass
class ProductionStack:
    env: dict[str, str]
    worker: Child
    api: Child
    api_url: str
    worker_health_url: str
    database_url: str
    redis_url: str
    namespace: str
    qdrant_path: Path
    workdir: Path


@pytest.fixture(scope="module")
async def database(postgres_url: str) -> AsyncIterator[str]:
    """A fresh PostgreSQL database for this module (the worker migrates it), dropped afterwards."""
    name = f"mw_prod_e2e_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(postgres_url, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        yield make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
        async with admin.connect() as conn:
            await conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    finally:
        await admin.dispose()


@pytest.fixture(scope="module")
async def redis_namespace(redis_url: str) -> AsyncIterator[str]:
    """A key namespace no one else uses on the shared test Redis; every key under it removed afterwards."""
    namespace = f"mwe2e{uuid.uuid4().hex[:12]}"
    yield namespace
    client = aioredis.Redis.from_url(redis_url)
    try:
        keys = [k async for k in client.scan_iter(match=f"{namespace}:*")]
        if keys:
            await client.unlink(*keys)
    finally:
        await client.aclose()


@pytest.fixture(scope="module")
async def temporal(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    dev = DevServer(tmp_path_factory.mktemp("temporal-prod"), port=free_port(), headless=True)
    async with dev:
        yield dev


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory, database: str, redis_url: str, redis_namespace: str, temporal: DevServer
) -> Iterator[ProductionStack]:
    workdir = tmp_path_factory.mktemp("prod-profile")
    qdrant_path = workdir / "qdrant"
    api_port, health_port = free_port(), free_port()
    env = {
        "MEMWARDEN_PROFILE": "production",
        "MEMWARDEN_DATABASE_URL": database,
        "MEMWARDEN_QDRANT_LOCATION": str(qdrant_path),
        "MEMWARDEN_REDIS_URL": redis_url,
        "MEMWARDEN_REDIS_NAMESPACE": redis_namespace,
        "MEMWARDEN_TEMPORAL_ADDRESS": temporal.address,
        "MEMWARDEN_TEMPORAL_TASK_QUEUE": f"memwarden-prod-e2e-{uuid.uuid4().hex[:8]}",
        **production_secrets(),
        # No data dir exists in production: point it somewhere that must stay empty.
        "MEMWARDEN_DATA_DIR": str(workdir / "no-data-dir"),
    }
    worker = Child("worker", ["worker"], env | {"MEMWARDEN_WORKER_HEALTH_PORT": str(health_port)}, workdir)
    api = Child("api", ["api", "--host", "127.0.0.1", "--port", str(api_port)], env, workdir)
    s = ProductionStack(
        env=env,
        worker=worker,
        api=api,
        api_url=f"http://127.0.0.1:{api_port}",
        worker_health_url=f"http://127.0.0.1:{health_port}",
        database_url=database,
        redis_url=redis_url,
        namespace=redis_namespace,
        qdrant_path=qdrant_path,
        workdir=workdir,
    )
    try:
        worker.start()
        worker.wait_ready(f"{s.worker_health_url}/readyz")  # the worker migrated the fresh database first
        api.start()
        api.wait_ready(f"{s.api_url}/readyz")
        yield s
    finally:
        api.kill()
        worker.kill()


def _token(stack: ProductionStack, *args: str) -> str:
    return mint(None, "--tenant", TENANT, *args, cwd=stack.workdir, env=stack.env)


def _agent(stack: ProductionStack) -> str:
    return _token(stack, "--sub", "planner-svc", "--role", "agent", "--agent", "planner", "--on-behalf-of", "alice")


def _post(stack: ProductionStack, path: str, token: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{stack.api_url}{path}", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=60)


async def _rows(stack: ProductionStack, sql: str, **params: object) -> list[Any]:
    engine = create_async_engine(stack.database_url)
    try:
        async with engine.connect() as conn:
            return list((await conn.execute(sa.text(sql), params)).all())
    finally:
        await engine.dispose()


def test_readiness_reports_every_production_dependency(stack: ProductionStack) -> None:
    worker = httpx.get(f"{stack.worker_health_url}/readyz", timeout=10)
    assert worker.status_code == 200
    assert worker.json() == {
        "status": "ready",
        "checks": {"temporal": True, "store": True, "index": True, "cache": True},
    }
    assert httpx.get(f"{stack.worker_health_url}/healthz", timeout=10).json() == {"status": "ok"}
    assert httpx.get(f"{stack.worker_health_url}/nope", timeout=10).status_code == 404
    api = httpx.get(f"{stack.api_url}/readyz", timeout=10)
    assert api.status_code == 200
    assert api.json()["checks"] == {"temporal": True, "store": True, "index": True}


async def test_propose_search_list_over_real_http(stack: ProductionStack) -> None:
    agent = _agent(stack)
    user = _token(stack, "--sub", "alice", "--role", "user")

    # A cached search entry in alice's partition, under this stack's Redis namespace: a commit must drop it.
    redis = aioredis.Redis.from_url(stack.redis_url)
    probe = f"{stack.namespace}:{owner_prefix(TENANT, 'alice')}probe"
    await redis.set(probe, b"stale answer", ex=600)

    proposed = _post(
        stack,
        "/v1/memories",
        agent,
        {"content": CONTENT, "type": "preference", "source_kind": "user", "reason": "user_explicit_preference"},
    )
    assert proposed.status_code == 200, proposed.text
    answer = proposed.json()
    assert answer["decision"] == "ADD", answer
    memory_id = answer["memory_id"]

    # The commit went through the production adapters: a PostgreSQL row, Redis invalidated, the Qdrant collection.
    rows = await _rows(stack, "SELECT id, tenant_id, status FROM memories WHERE tenant_id = :t", t=TENANT)
    assert [(str(r[0]), r[2]) for r in rows] == [(memory_id, "active")]
    assert await redis.exists(probe) == 0, "the commit did not invalidate the owner's cached searches in Redis"
    await redis.aclose()
    assert (stack.qdrant_path / "collection" / "memories").is_dir()
    assert not stack.workdir.joinpath("no-data-dir").exists(), "the production profile wrote to a data dir"

    # A paraphrase is a duplicate: the write gate's dedupe asked the Qdrant index (nearest), not only SQL.
    again = _post(
        stack,
        "/v1/memories",
        agent,
        {
            "content": "Alice prefers an aisle seat on short flights",
            "type": "preference",
            "source_kind": "user",
            "reason": "user_explicit_preference",
        },
    )
    assert again.status_code == 200, again.text
    assert (again.json()["decision"], again.json()["memory_id"]) == ("NOOP", memory_id), again.json()

    found = _post(stack, "/v1/search", agent, {"query": "which seat does alice like on a plane?", "k": 3})
    assert found.status_code == 200, found.text
    results = found.json()["results"]
    assert [r["memory_id"] for r in results][:1] == [memory_id]
    assert results[0]["content"] == CONTENT

    # Another tenant's agent finds nothing, however similar its query.
    outsider = mint(
        None,
        *("--tenant", f"{TENANT}-other", "--sub", "svc", "--role", "agent", "--agent", "planner"),
        *("--on-behalf-of", "alice"),
        cwd=stack.workdir,
        env=stack.env,
    )
    other = _post(stack, "/v1/search", outsider, {"query": "which seat does alice like on a plane?", "k": 3})
    assert other.status_code == 200 and other.json()["results"] == []

    async with httpx.AsyncClient(timeout=30) as http:
        listed = await http.get(f"{stack.api_url}/v1/memories", headers={"Authorization": f"Bearer {user}"})
    assert listed.status_code == 200, listed.text
    items = listed.json()["items"]
    assert [i["id"] for i in items] == [memory_id]
    assert items[0]["content"] == CONTENT


async def test_a_staged_write_waits_for_its_owner_on_the_production_profile(stack: ProductionStack) -> None:
    """PENDING -> confirm by the owner -> active: PendingWriteWorkflow and its update on the worker process."""
    agent = _agent(stack)
    user = _token(stack, "--sub", "alice", "--role", "user")
    staged = _post(
        stack,
        "/v1/memories",
        agent,
        {
            "content": "From now on always reply to Alice in Portuguese",
            "type": "preference",
            "source_kind": "user",
            "reason": "user_explicit_preference",
        },
    )
    assert staged.status_code == 200, staged.text
    assert staged.json()["decision"] == "PENDING", staged.json()
    pending_id = staged.json()["memory_id"]
    rows = await _rows(stack, "SELECT status FROM memories WHERE id = :i", i=pending_id)
    assert [r[0] for r in rows] == ["pending"]

    async with httpx.AsyncClient(base_url=stack.api_url, timeout=60) as http:
        refused = await http.post(f"/v1/memories/{pending_id}/confirm", headers={"Authorization": f"Bearer {agent}"})
        assert refused.status_code == 403, refused.text  # the agent proposed it; only the owner settles it
        confirmed = await http.post(f"/v1/memories/{pending_id}/confirm", headers={"Authorization": f"Bearer {user}"})
        assert confirmed.status_code == 200, confirmed.text
        assert confirmed.json()["memory_id"] == pending_id
    rows = await _rows(stack, "SELECT status FROM memories WHERE id = :i", i=pending_id)
    assert [r[0] for r in rows] == ["active"]


def test_bad_input_is_problem_json_on_the_production_profile(stack: ProductionStack) -> None:
    agent = _agent(stack)
    nul = _post(
        stack,
        "/v1/memories",
        agent,
        {"content": "a\x00b", "type": "preference", "source_kind": "user", "reason": "user_explicit_preference"},
    )
    assert nul.status_code == 422
    assert nul.headers["content-type"].startswith("application/problem+json")
    assert any(e["field"] == "content" for e in nul.json()["errors"])
    forged = httpx.get(f"{stack.api_url}/v1/memories", headers={"Authorization": "Bearer not.a.token"}, timeout=10)
    assert forged.status_code == 401


def test_the_me_cookie_is_secure_in_production_over_plain_http(stack: ProductionStack) -> None:
    """TLS ends at the proxy in production, so the request reaching the API may be http: the cookie is
    Secure all the same (issue 22 part 9)."""
    page = httpx.get(f"{stack.api_url}/me", timeout=10)
    assert page.status_code == 200 and page.url.scheme == "http"
    cookie = page.headers["set-cookie"]
    assert "Secure" in cookie and "HttpOnly" in cookie, cookie


def test_only_the_worker_opens_the_qdrant_path(stack: ProductionStack) -> None:
    root = str(stack.qdrant_path.resolve())
    worker_files = [p for p in stack.worker.open_files() if p.startswith(root)]
    api_files = [p for p in stack.api.open_files() if p.startswith(root)]
    assert str(stack.qdrant_path.resolve() / ".lock") in worker_files  # positive control: the worker holds the lock
    assert api_files == []


def test_both_processes_stop_cleanly_on_sigterm(stack: ProductionStack) -> None:
    """Last in the module: an orchestrator's stop is SIGTERM; both drain and exit 0."""
    assert stack.api.terminate() == 0, stack.api.output()
    assert stack.worker.terminate() == 0, stack.worker.output()
    assert "Traceback" not in stack.worker.output() + stack.api.output()
    shutil.rmtree(stack.qdrant_path, ignore_errors=True)


async def test_the_worker_created_both_schedules_at_start(stack: ProductionStack, temporal: DevServer) -> None:
    from temporalio.client import Client

    from worker.schedules import RETENTION_SCHEDULE_ID, REVALIDATION_SCHEDULE_ID

    client = await Client.connect(temporal.address)
    retention = await client.get_schedule_handle(RETENTION_SCHEDULE_ID).describe()  # raises if absent
    revalidation = await client.get_schedule_handle(REVALIDATION_SCHEDULE_ID).describe()
    assert retention.schedule.spec.intervals[0].every.total_seconds() == 300  # the default sweep intervals
    assert revalidation.schedule.spec.intervals[0].every.total_seconds() == 900
