"""A 10,000-line import survives `kill -9` of its worker half way, and no line is applied twice.

All real: the Temporal dev server, `memwarden worker` as a child process (killed with SIGKILL while a
batch is in flight, then started again), PostgreSQL (a database of this test's own), the API under
uvicorn in this process (the production shape: no worker beside it), and `memwarden import`'s own
upload and follow code. Afterwards every applicable line has exactly one memory, named by its line,
with exactly one `create` audit event; each line has exactly one outcome; the counts add up; the bad
lines are reported by number; the audit chain verifies. Every text is synthetic.
"""

from __future__ import annotations

import asyncio
import io
import json
import random
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
import uvicorn

from api.app import create_app
from memwarden.identity import mint_token
from memwarden.stores.sql import SqlStore
from memwarden.stores.sql_models import audit_events, import_outcomes, memories
from stack.devserver import DevServer, free_port
from stack.embedded import run_api
from stack.import_cli import run_import
from tests.conftest import service_url
from tests.e2e.harness import Child
from tests.store_support import temporary_database
from tests.workflows.record_histories import TEST_CODEC_KEY, settings_for

pytestmark = [pytest.mark.postgres]

LINES = 10_000
INVALID_EVERY = 997
"""Lines that are not JSON (their numbers are multiples of this)."""
SECRET_EVERY = 1499
"""Lines holding a credential (the gate rejects them)."""
WAIT_S = 600.0
ADJ = "red blue green old new small large heavy light dusty shiny wooden metal plastic paper glass".split()
NOUN = "box lamp folder key bike kettle drill ladder tent radio camera guitar chair mirror clock printer".split()
PLACE = "garage attic cellar office kitchen shed hallway studio closet basement loft pantry porch garden".split()


def the_file(path: Path) -> tuple[set[int], set[int]]:
    """10,000 candidate lines, each a distinct fact (its own number); returns the invalid and secret lines."""
    rng = random.Random(24)
    invalid, secret = set(), set()
    with path.open("w") as out:
        for n in range(1, LINES + 1):
            if n % INVALID_EVERY == 0:
                invalid.add(n)
                out.write('{"content": "cut short\n')
                continue
            text = f"The {rng.choice(ADJ)} {rng.choice(NOUN)} number {n} is in the {rng.choice(PLACE)}"
            if n % SECRET_EVERY == 0:
                secret.add(n)
                text = f"the deploy key for shelf {n} is AKIAZ7QXW3SYNTH{n:05d}"
            body = {"content": text, "type": "fact", "source_kind": "user", "reason": "user_stated_fact"}
            out.write(json.dumps(body | {"importance": 0.8}) + "\n")
    return invalid, secret


@pytest.fixture
async def db_url() -> AsyncIterator[str]:
    async with temporary_database(service_url("MEMWARDEN_TEST_POSTGRES_URL"), "mw_chaos") as url:
        yield url


async def test_a_killed_worker_half_way_applies_no_line_twice(tmp_path: Path, db_url: str) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    task_queue = f"import-kill-{uuid.uuid4().hex[:8]}"
    auth_secret = secrets.token_urlsafe(48)
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    path = tmp_path / "big.ndjson"
    invalid, secret = the_file(path)
    async with DevServer(tmp_path / "temporal", port=free_port(), headless=True) as dev:
        settings = settings_for(
            data_dir,
            dev.address,
            task_queue,
            database_url=db_url,
            auth_secret=auth_secret,
            api_port=free_port(),
            import_heartbeat_seconds=5,
        )
        env = {
            "MEMWARDEN_DATABASE_URL": db_url,
            "MEMWARDEN_TEMPORAL_ADDRESS": dev.address,
            "MEMWARDEN_TEMPORAL_TASK_QUEUE": task_queue,
            "MEMWARDEN_CODEC_KEY": TEST_CODEC_KEY,
            "MEMWARDEN_AUTH_SECRET": auth_secret,
            "MEMWARDEN_WORKER_HEALTH_PORT": str(free_port()),
        }
        health = f"http://127.0.0.1:{env['MEMWARDEN_WORKER_HEALTH_PORT']}/readyz"
        worker = Child("worker", ["worker", "--data-dir", str(data_dir)], env, data_dir)
        worker.start()
        servers: list[uvicorn.Server] = []
        serving: asyncio.Task[None] | None = None
        store = await SqlStore.open(db_url)
        try:
            await asyncio.to_thread(worker.wait_ready, health, 180)
            serving = asyncio.create_task(run_api(settings, servers, create_app(settings)))
            while not (servers and servers[0].started):
                assert not serving.done(), "the API did not start"
                await asyncio.sleep(0.05)
            base = f"http://127.0.0.1:{settings.api_port}"
            token = mint_token(settings.auth_secret_value, tenant=tenant, sub="ivy", role="user")
            out = io.StringIO()
            started = time.monotonic()
            following = asyncio.create_task(asyncio.to_thread(run_import, path, base, token, out=out, timeout_s=WAIT_S))
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as http:
                import_id = await _import_id(out, following)
                state = await _wait(http, import_id, lambda s: s["done_lines"] >= LINES // 2, following)
                worker.kill()  # kill -9, a batch in flight
                killed_at = state["done_lines"]
                await asyncio.sleep(2)
                stalled = (await http.get(f"/v1/imports/{import_id}")).json()
                assert stalled["status"] == "running" and stalled["done_lines"] < LINES
                worker = Child("worker", ["worker", "--data-dir", str(data_dir)], env, data_dir)
                worker.start()
                code = await asyncio.wait_for(following, WAIT_S)
                elapsed = time.monotonic() - started
                assert code == 0, out.getvalue() + worker.output()
                final = (await http.get(f"/v1/imports/{import_id}", params={"limit": 1000})).json()
        finally:
            if servers:
                servers[0].should_exit = True
            if serving is not None:
                await asyncio.wait_for(serving, 15)
            worker.kill()

        try:
            applicable = LINES - len(invalid) - len(secret)
            assert final["status"] == "done" and final["done_lines"] == LINES and final["position"] == LINES + 1
            assert final["counts"] == {
                "ADD": applicable,
                "UPDATE": 0,
                "NOOP": 0,
                "PENDING": 0,
                "REJECT": len(secret),
                "ERROR": len(invalid),
            }, final["counts"]
            reported = {(e["line"], e["reason"]) for e in final["errors"]}
            assert reported == {(n, "invalid_json") for n in invalid} | {(n, "secret_detected") for n in secret}
            async with store.engine.connect() as conn:
                o, m, a = import_outcomes.c, memories.c, audit_events.c
                lines = await conn.scalar(sa.select(sa.func.count()).where(o.import_id == import_id))
                stored = await conn.scalar(sa.select(sa.func.count()).where(m.tenant_id == tenant))
                distinct = await conn.scalar(
                    sa.select(sa.func.count(sa.distinct(o.memory_id))).where(
                        o.import_id == import_id, o.decision == "ADD"
                    )
                )
                creates = await conn.scalar(
                    sa.select(sa.func.count()).where(a.tenant_id == tenant, a.operation == "create")
                )
                distinct_creates = await conn.scalar(
                    sa.select(sa.func.count(sa.distinct(a.memory_id))).where(
                        a.tenant_id == tenant, a.operation == "create"
                    )
                )
                parked = await conn.scalar(sa.text("SELECT count(*) FROM import_lines"))
            assert lines == LINES  # one outcome per line
            assert stored == distinct == applicable  # exactly one memory per applicable line
            assert creates == distinct_creates == applicable  # and one create event each
            assert parked == 0  # every claim check dropped with its line's outcome
            ok, broken = await store.verify_audit()
            assert ok, f"the audit chain breaks at {broken}"
        finally:
            await store.close()
        rate = LINES / elapsed
        print(f"\nimport of {LINES} lines, worker killed at {killed_at}: {elapsed:.0f} s, {rate:.0f} lines/s")


async def _import_id(out: io.StringIO, following: asyncio.Future[int]) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        text = out.getvalue()
        if text.startswith("import "):
            return text.split()[1].rstrip(":")
        assert not following.done(), text
        await asyncio.sleep(0.1)
    raise AssertionError("the import did not start")


async def _wait(http: httpx.AsyncClient, import_id: str, ready: object, following: asyncio.Future[int]) -> dict:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        answer = await http.get(f"/v1/imports/{import_id}")
        if answer.status_code == 200 and ready(answer.json()):  # type: ignore[operator]
            return answer.json()  # type: ignore[no-any-return]
        assert not following.done()
        await asyncio.sleep(0.2)
    raise AssertionError("the import never got half way")
