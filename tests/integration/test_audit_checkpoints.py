"""The audit chain with signed checkpoints, on SQLite and PostgreSQL: tampering is found, and named.

Each test gets a fresh database (a new SQLite file; a new PostgreSQL schema, dropped afterwards),
because the chain is global and a test must see the whole of it. Concurrency is proven with real
parallel writers: several OS processes appending at once, each with its own engine.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine

from memwarden.audit_signing import CheckpointSigner, CheckpointVerifier
from memwarden.stores.audit import GENESIS_HASH, AuditEventIn, chain_hash
from memwarden.stores.sql import SqlStore
from tests.conftest import service_url

REPO_ROOT = Path(__file__).resolve().parents[2]
BASE = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC)
SEED = CheckpointSigner.generate_base64()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "postgresql":
        service_url("MEMWARDEN_TEST_POSTGRES_URL")
    return request.param


@asynccontextmanager
async def database(backend: str, tmp_dir: Path) -> AsyncIterator[tuple[str, str | None]]:
    if backend == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_dir / uuid.uuid4().hex / 'memwarden.db'}", None
        return
    url = service_url("MEMWARDEN_TEST_POSTGRES_URL")
    schema = f"mw7_{uuid.uuid4().hex[:16]}"
    admin = create_async_engine(url)
    try:
        async with admin.begin() as conn:
            await conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        yield url, schema
    finally:
        async with admin.begin() as conn:
            await conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        await admin.dispose()


@asynccontextmanager
async def signed_store(backend: str, tmp_dir: Path, every: int = 4) -> AsyncIterator[SqlStore]:
    async with database(backend, tmp_dir) as (url, schema):
        store = await SqlStore.open(
            url, schema=schema, audit_signer=CheckpointSigner.from_base64(SEED), checkpoint_every=every
        )
        try:
            await store.migrate()
            yield store
        finally:
            await store.close()


def verifier() -> CheckpointVerifier:
    return CheckpointVerifier.from_base64([CheckpointSigner.from_base64(SEED).public_base64()])


def event(n: int, **overrides: Any) -> AuditEventIn:
    fields: dict[str, Any] = {
        "tenant_id": "t-audit",
        "actor": "agent:a1",
        "operation": "create",
        "memory_id": f"m{n}",
        "namespace": "user:u1",
        "reason": "accepted",
        "workflow_id": f"remember-m{n}",
        "at": BASE + timedelta(seconds=n),
        "details": {"n": n},
    }
    fields.update(overrides)
    return AuditEventIn(**fields)


async def rows(store: SqlStore, sql: str) -> list[Any]:
    async with store.engine.connect() as conn:
        return list((await conn.execute(sa.text(sql))).all())


async def execute(store: SqlStore, sql: str, **params: Any) -> None:
    async with store.engine.begin() as conn:
        await conn.execute(sa.text(sql), params)


async def test_checkpoints_are_signed_at_intervals_and_verify(backend: str, tmp_path: Path) -> None:
    async with signed_store(backend, tmp_path, every=4) as store:
        for n in range(10):
            await store.append_audit(event(n))
        cps = sorted(await store.list_checkpoints(), key=lambda c: c.seq)
        assert [c.seq for c in cps] == [4, 8]
        assert [c.prev_seq for c in cps] == [0, 4]
        assert [c.event_count for c in cps] == [4, 8]
        result = await store.verify_audit_chain(verifier(), require_every=4)
        assert result.ok and result.events == 10 and result.checkpoints == 2 and result.head_seq == 10
        assert result.last_good_checkpoint == 8
        # a forced checkpoint signs the current head, once
        forced = await store.checkpoint_audit()
        assert forced is not None and forced.seq == 10 and forced.prev_seq == 8
        assert await store.checkpoint_audit() is None
        # a verifier that does not know the signing key refuses the first checkpoint
        stranger = CheckpointVerifier.from_base64(
            [CheckpointSigner.from_base64(CheckpointSigner.generate_base64()).public_base64()]
        )
        other = await store.verify_audit_chain(stranger)
        assert not other.ok and other.broken_seq == 4 and other.reason == "checkpoint_unknown_key"


async def test_tampering_with_one_row_fails_at_exactly_that_row(backend: str, tmp_path: Path) -> None:
    async with signed_store(backend, tmp_path, every=4) as store:
        for n in range(9):
            await store.append_audit(event(n))
        await execute(store, "UPDATE audit_events SET reason = 'edited' WHERE seq = 6")
        result = await store.verify_audit_chain(verifier())
        assert (result.ok, result.broken_seq, result.reason) == (False, 6, "hash_mismatch")
        assert result.events == 5 and result.last_good_checkpoint == 4


async def test_a_rebuilt_chain_is_caught_by_the_next_signed_checkpoint(backend: str, tmp_path: Path) -> None:
    async with signed_store(backend, tmp_path, every=4) as store:
        for n in range(10):
            await store.append_audit(event(n))
        # a database writer edits event 6 and recomputes every hash from there on
        events = {e.seq: e for e in (await store.list_audit("t-audit", limit=100, cursor=None))[0]}
        prev_hash = events[5].hash
        for seq in range(6, 11):
            e = events[seq]
            forged = AuditEventIn.model_validate(
                {
                    **e.model_dump(exclude={"seq", "prev_hash", "hash"}),
                    **({"actor": "operator:mallory"} if seq == 6 else {}),
                }
            )
            new_hash = chain_hash(prev_hash, forged)
            await execute(
                store,
                "UPDATE audit_events SET actor = :actor, prev_hash = :p, hash = :h WHERE seq = :s",
                actor=forged.actor,
                p=prev_hash,
                h=new_hash,
                s=seq,
            )
            prev_hash = new_hash
        assert await store.verify_audit() == (True, None)  # the links alone are consistent again
        result = await store.verify_audit_chain(verifier())
        assert (result.ok, result.broken_seq, result.reason) == (False, 8, "checkpoint_hash_mismatch")
        assert result.last_good_checkpoint == 4  # history up to seq 4 is as signed


async def test_deleting_events_or_checkpoints_or_forging_a_signature_is_named(backend: str, tmp_path: Path) -> None:
    async with signed_store(backend, tmp_path, every=4) as store:
        for n in range(9):
            await store.append_audit(event(n))
        assert (await store.verify_audit_chain(verifier(), require_every=4)).ok
        # forged signature
        await execute(store, "UPDATE audit_checkpoints SET signature = :s WHERE seq = 4", s="A" * 88)
        result = await store.verify_audit_chain(verifier())
        assert (result.broken_seq, result.reason) == (4, "checkpoint_signature_invalid")
        # dropping that checkpoint instead breaks the next one's back-pointer
        await execute(store, "DELETE FROM audit_checkpoints WHERE seq = 4")
        result = await store.verify_audit_chain(verifier())
        assert (result.broken_seq, result.reason) == (8, "checkpoint_sequence_broken")


async def test_truncating_the_tail_or_bypassing_the_signer_is_found(backend: str, tmp_path: Path) -> None:
    async with signed_store(backend, tmp_path, every=4) as store:
        for n in range(9):
            await store.append_audit(event(n))
        await execute(store, "DELETE FROM audit_events WHERE seq >= 8")
        result = await store.verify_audit_chain(verifier())
        assert (result.broken_seq, result.reason) == (8, "events_missing_after_checkpoint")
        assert result.last_good_checkpoint == 4
        # a writer without the signing key appends past the interval: the unsigned stretch is reported
        unsigned = await SqlStore.open(
            store.engine.url.render_as_string(hide_password=False), schema=await schema_of(store)
        )
        try:
            await execute(store, "DELETE FROM audit_checkpoints WHERE seq = 8")
            for n in range(10, 13):
                await unsigned.append_audit(event(n))
        finally:
            await unsigned.close()
        assert (await store.verify_audit_chain(verifier())).ok  # links and remaining checkpoints hold
        result = await store.verify_audit_chain(verifier(), require_every=4)
        assert (result.ok, result.reason, result.last_good_checkpoint) == (False, "checkpoint_missing", 4)


async def schema_of(store: SqlStore) -> str | None:
    if store.dialect != "postgresql":
        return None
    return str((await rows(store, "SELECT current_schema()"))[0][0])


WRITER_SCRIPT = """
import asyncio, sys
from datetime import UTC, datetime
from memwarden.stores.audit import AuditEventIn
from memwarden.audit_signing import CheckpointSigner
from memwarden.stores.sql import SqlStore

async def main(url, schema, seed, writer, count):
    store = await SqlStore.open(url, schema=schema or None, audit_signer=CheckpointSigner.from_base64(seed),
                                checkpoint_every=7)
    try:
        async def one(n):
            await store.append_audit(AuditEventIn(tenant_id="t-par", actor=f"system:w{writer}", operation="create",
                                                  memory_id=f"w{writer}-{n}", details={"n": n}))
        await asyncio.gather(*(one(n) for n in range(count)))
    finally:
        await store.close()

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])))
"""


async def test_parallel_writer_processes_never_fork_the_chain(backend: str, tmp_path: Path) -> None:
    writers, per_writer = 4, 40
    async with signed_store(backend, tmp_path, every=7) as store:
        url = store.engine.url.render_as_string(hide_password=False)
        schema = await schema_of(store) or ""
        env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
        procs = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-c",
                WRITER_SCRIPT,
                url,
                schema,
                SEED,
                str(w),
                str(per_writer),
                env=env,
                stderr=asyncio.subprocess.PIPE,
            )
            for w in range(writers)
        ]
        for proc in procs:
            _, err = await proc.communicate()
            assert proc.returncode == 0, err.decode()[-2000:]
        chain = await rows(store, "SELECT seq, prev_hash, hash FROM audit_events ORDER BY seq")
        assert len(chain) == writers * per_writer
        assert chain[0].prev_hash == GENESIS_HASH
        assert len({r.prev_hash for r in chain}) == len(chain)  # no two events share a parent: no fork
        assert [r.prev_hash for r in chain[1:]] == [r.hash for r in chain[:-1]]
        cps = sorted(c.seq for c in await store.list_checkpoints(limit=1000))
        assert cps == list(range(7, len(chain) + 1, 7))
        result = await store.verify_audit_chain(verifier(), require_every=7)
        assert result.ok and result.events == len(chain), result
