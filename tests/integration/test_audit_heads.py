"""The audit tail cannot be rewritten unnoticed: heads signed on a timer, published outside the database
(an append-only file, the service log, an HTTP sink), and verification held to them.

Store level on SQLite and PostgreSQL (the tail deleted, or rewritten with the chain recomputed and the
checkpoints that vouched for it removed, as a database writer could), then the running stack: the
worker's timer signs a quiet chain, the heads reach the file and the log, and `GET /v1/audit/verify`
reports the unanchored tail.
"""

from __future__ import annotations

import asyncio
import json
import logging
import stat
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from memwarden.audit_heads import AuditHeads, CheckpointTimer, sign_and_publish
from memwarden.audit_signing import CheckpointSigner, CheckpointVerifier
from memwarden.stores.audit import AuditEventIn, chain_hash
from memwarden.stores.sql import SqlStore
from memwarden.stores.sql_models import audit_checkpoints, audit_events
from tests.integration.api_stack import MEMORY, Api, embedded_api
from tests.store_support import fresh_store

SIGNER = CheckpointSigner.from_base64(CheckpointSigner.generate_base64())
VERIFIER = CheckpointVerifier.from_base64([SIGNER.public_base64()])
FIELDS = tuple(AuditEventIn.model_fields)


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    async with fresh_store(request.param, tmp_path, audit_signer=SIGNER, checkpoint_every=1000) as s:
        yield s


def event(n: int) -> AuditEventIn:
    return AuditEventIn(tenant_id="t1", actor="system:test", operation="create", memory_id=f"m{n}", reason="r")


async def rewrite_tail(store: SqlStore, from_seq: int, *, delete: bool) -> None:
    """What a database writer could do: drop (or edit) events from `from_seq` on, recompute every hash
    after, and remove the checkpoints that would have caught it."""
    a = audit_events.c
    async with store.engine.begin() as conn:
        await conn.execute(sa.delete(audit_checkpoints).where(audit_checkpoints.c.seq >= from_seq))
        if delete:
            await conn.execute(sa.delete(audit_events).where(a.seq >= from_seq))
            return
        await conn.execute(sa.update(audit_events).where(a.seq == from_seq).values(reason="nothing_happened"))
        prev = await conn.scalar(sa.select(a.hash).where(a.seq < from_seq).order_by(a.seq.desc()).limit(1))
        rows = (await conn.execute(sa.select(audit_events).where(a.seq >= from_seq).order_by(a.seq))).mappings()
        for row in list(rows):
            stored = AuditEventIn.model_construct(**{f: row[f] for f in FIELDS})
            new_hash = chain_hash(prev, stored)
            await conn.execute(sa.update(audit_events).where(a.seq == row["seq"]).values(prev_hash=prev, hash=new_hash))
            prev = new_hash


@pytest.mark.parametrize("delete", [True, False], ids=["tail_deleted", "tail_rewritten"])
async def test_a_tail_rewritten_with_the_chain_recomputed_fails_against_published_heads(
    store: SqlStore, tmp_path: Path, delete: bool
) -> None:
    heads = AuditHeads.from_paths(tmp_path / "heads.jsonl")
    for n in range(6):
        await store.append_audit(event(n))
    assert await sign_and_publish(store, heads) == 1
    [published] = heads.file.read()
    assert published.seq == 6 and VERIFIER.check(published) is None
    await store.append_audit(event(6))
    result = await store.verify_audit_chain(VERIFIER, require_every=1000, published=await heads.published())
    assert result.ok and (result.last_published_seq, result.events_past_published) == (6, 1)

    await rewrite_tail(store, 5, delete=delete)
    # Without the published heads the recomputed chain verifies: that is the hole being closed.
    assert (await store.verify_audit_chain(VERIFIER, require_every=1000)).ok
    result = await store.verify_audit_chain(VERIFIER, require_every=1000, published=await heads.published())
    assert not result.ok
    expected = "events_missing_before_published_head" if delete else "published_head_mismatch"
    assert (result.reason, result.broken_seq) == (expected, 6)


async def test_a_forged_published_head_is_refused(store: SqlStore, tmp_path: Path) -> None:
    heads = AuditHeads.from_paths(tmp_path / "heads.jsonl")
    for n in range(3):
        await store.append_audit(event(n))
    await sign_and_publish(store, heads)
    [real] = heads.file.read()
    other = CheckpointSigner.from_base64(CheckpointSigner.generate_base64())
    forged = other.sign(seq=real.seq, head_hash=real.head_hash, event_count=3, prev_seq=0, at=real.at)
    result = await store.verify_audit_chain(VERIFIER, published=[forged])
    assert (result.ok, result.reason) == (False, "published_head_signature_invalid")


class HeadsServer:
    """A real HTTP sink on 127.0.0.1: keeps what is POSTed, answers it back on GET."""

    def __init__(self) -> None:
        self.heads: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                server.heads.append(json.loads(self.rfile.read(length)))
                self.send_response(201)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                body = json.dumps(server.heads).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._http.server_address[1]}/heads"

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()


@pytest.fixture(scope="module")
def sink() -> Iterator[HeadsServer]:
    server = HeadsServer()
    yield server
    server.close()


async def test_the_http_sink_receives_every_head_and_answers_them_back(
    store: SqlStore, tmp_path: Path, sink: HeadsServer
) -> None:
    sink.heads.clear()
    heads = AuditHeads.from_paths(tmp_path / "heads.jsonl", sink.url)
    timer = CheckpointTimer(store, heads, 0.05)
    await timer.start()
    for n in range(3):
        await store.append_audit(event(n))
        await asyncio.sleep(0.15)
    await timer.stop()
    assert [h["seq"] for h in sink.heads] == [h.seq for h in heads.file.read()] == [1, 2, 3]
    heads.file.path.unlink()  # the file gone, the sink still holds the tail
    await rewrite_tail(store, 3, delete=True)
    result = await store.verify_audit_chain(VERIFIER, published=await heads.published())
    assert (result.ok, result.reason) == (False, "events_missing_before_published_head")


# -- the running stack ---------------------------------------------------------------------------


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture(scope="module")
def head_log() -> Iterator[Lines]:
    handler = Lines()
    logger = logging.getLogger("memwarden.audit.heads")
    previous = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(previous)


@pytest.fixture(scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory, head_log: Lines) -> AsyncIterator[Api]:
    data_dir = Path(tmp_path_factory.mktemp("audit-heads"))
    async with embedded_api(data_dir, audit_checkpoint_every=10_000, audit_checkpoint_seconds=0.2) as stack:
        yield stack


async def test_the_worker_signs_a_quiet_chain_on_a_timer_and_publishes_it(
    api: Api, http: httpx.AsyncClient, head_log: Lines
) -> None:
    t = f"t-{uuid.uuid4().hex[:8]}"
    for n in range(3):
        answer = await http.post("/v1/memories", headers=api.auth(t, "alice"), json=MEMORY | {"content": f"tea {n}"})
        assert answer.status_code == 200, answer.text
    head = max(e.seq for e in (await api.store.list_audit(t, limit=50, cursor=None))[0])
    path = api.settings.audit_heads_path
    deadline = time.monotonic() + 10
    while not path.exists() or max((json.loads(x)["seq"] for x in path.read_text().splitlines()), default=0) < head:
        assert time.monotonic() < deadline, "no head was published within 10 s of a quiet chain"
        await asyncio.sleep(0.1)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    published = [json.loads(x) for x in path.read_text().splitlines()]
    assert any(f'"seq":{h["seq"]}' in line.replace(" ", "") for h in published for line in head_log.lines)
    ops = api.auth(t, "ops-1", "operator")
    body = (await http.get("/v1/audit/verify", headers=ops)).json()
    assert body["ok"] and body["last_published_seq"] >= head and body["events_past_published"] >= 0, body

    # The tail rewritten in the database, the chain recomputed: the published heads catch it.
    await rewrite_tail(api.store, head, delete=False)
    body = (await http.get("/v1/audit/verify", headers=ops)).json()
    assert not body["ok"] and body["reason"] in ("published_head_mismatch",), body
