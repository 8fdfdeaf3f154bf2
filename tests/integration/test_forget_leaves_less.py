"""Forget leaves less behind (issue 22 part 8): what a tombstone keeps, and compaction of every copy.

On SQLite and PostgreSQL: the store sink reduces a forgotten row to ids, statuses, times and
pseudonyms (no slot, no source_ref, provenance only its writer, the owner a keyed pseudonym); a
deletion's requester is stored as a pseudonym and its receipt's requester_hash is unchanged. A
replica's tombstone keeps neither owner nor slot, and a PostgreSQL replica is vacuumed like the
primary (its own statistics say so).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from memwarden.forget import OwnerSelector, redacted, selector_key, subject_hash, subject_key
from memwarden.records import Provenance, SourceRef, Status
from memwarden.sinks import ReplicaSink, StoreContentSink
from memwarden.stores.audit import Pseudonymizer, is_pseudonym
from memwarden.stores.forget import ForgetStore
from memwarden.stores.replicas import ReplicaStore
from memwarden.stores.sql import SqlStore
from memwarden.stores.sql_models import deletions, memories
from memwarden.stores.tombstones import requester_hash
from tests.conftest import service_url
from tests.integration.test_sinks_contract import lineage, record
from tests.store_support import fresh_store

KEY = subject_key("a-test-secret-" + "x" * 40)
PSEUDONYMS = Pseudonymizer(KEY)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    async with fresh_store(request.param, tmp_path, schema_prefix="mw_less", audit_pseudonyms=PSEUDONYMS) as s:
        yield s


async def test_a_purged_row_keeps_ids_and_pseudonyms_only(store: SqlStore) -> None:
    t = f"t-{uuid.uuid4().hex[:8]}"
    owner = f"alice{uuid.uuid4().hex[:8]}"
    doomed = await store.insert_memory(
        record(
            t,
            owner,
            "alice takes warfarin",
            slot="medical.medication",
            source_ref=SourceRef(system="ehr", key="patient-4711", version="v3"),
            provenance=Provenance(session="s-9", turn="D2:7", span="0:20", speaker="Alice", writer=f"user:{owner}"),
        )
    )
    kept = await store.insert_memory(record(t, owner, "alice likes tea", slot="drink.hot"))
    forget = ForgetStore(store)
    selector = OwnerSelector(owner_id=owner)
    body = redacted(selector, KEY, t)
    row, _ = await forget.begin(
        tenant_id=t,
        requester=f"user:{owner}",
        selector=OwnerSelector(owner_id=owner),
        redacted_selector=body,
        selector_key=selector_key(t, body),
        reason="gdpr_art17",
        subject_hash=subject_hash(KEY, t, owner),
        now=datetime.now(UTC),
    )
    # The deletion names its requester by pseudonym; the receipt's requester_hash is what it always was.
    assert owner not in row.requester and row.requester == PSEUDONYMS.actor(t, f"user:{owner}")
    assert requester_hash(KEY, t, row.requester) == subject_hash(KEY, t, f"user:{owner}")

    sink = StoreContentSink(store)
    before = await sink.verify_absent(lineage(t, [doomed.id, kept.id]))
    assert before.remaining >= 2
    await sink.purge(lineage(t, [doomed.id, kept.id]))
    assert (await sink.verify_absent(lineage(t, [doomed.id, kept.id]))).absent
    for memory_id in (doomed.id, kept.id):
        gone = await store.get_memory(t, memory_id)
        assert gone is not None and gone.status is Status.TOMBSTONED and gone.content is None
        assert gone.slot is None and gone.source_ref is None
        assert gone.owner_id == PSEUDONYMS.subject(t, owner) and is_pseudonym(gone.owner_id)
        assert gone.provenance.model_dump(exclude_none=True) in ({}, {"writer": PSEUDONYMS.actor(t, f"user:{owner}")})
    async with store.engine.connect() as conn:
        rows = (await conn.execute(sa.text("SELECT * FROM memories WHERE tenant_id = :t"), {"t": t})).all()
        deletion = (await conn.execute(sa.text("SELECT * FROM deletions WHERE tenant_id = :t"), {"t": t})).all()
    for text in (owner, "patient-4711", "medical.medication", "s-9", "D2:7", "Alice"):
        assert not [r for r in rows if text in str(tuple(r))], text
    assert not [r for r in deletion if owner in str(tuple(r))]


@pytest.fixture(params=["sqlite", pytest.param("postgresql-database", marks=pytest.mark.postgres)])
async def replica(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ReplicaStore]:
    if request.param == "sqlite":
        r = await ReplicaStore.open(f"sqlite+aiosqlite:///{tmp_path / 'replica.db'}")
        yield r
        await r.close()
        return
    url = service_url("MEMWARDEN_TEST_POSTGRES_URL")
    name = f"mw_replica_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(url, isolation_level="AUTOCOMMIT")
    async with admin.connect() as conn:
        await conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    r = await ReplicaStore.open(make_url(url).set(database=name).render_as_string(hide_password=False))
    try:
        yield r
    finally:
        await r.close()
        async with admin.connect() as conn:
            await conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        await admin.dispose()


async def _vacuums(replica: ReplicaStore) -> int:
    async with replica._engine.connect() as conn:
        return int(
            await conn.scalar(
                sa.text("SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'replica_memories'")
            )
            or 0
        )


async def test_a_replica_tombstone_names_no_owner_or_slot_and_postgres_is_vacuumed(replica: ReplicaStore) -> None:
    t = f"t-{uuid.uuid4().hex[:8]}"
    owner = f"alice{uuid.uuid4().hex[:8]}"
    copied = record(t, owner, "alice takes warfarin", slot="medical.medication")
    assert await replica.copy(copied)
    vacuums = await _vacuums(replica) if replica.dialect == "postgresql" else 0
    await ReplicaSink(replica).purge(lineage(t, [copied.id]))
    row = await replica.get(copied.id)
    assert row is not None and row["content"] is None and row["owner_id"] is None and row["slot"] is None
    assert (await ReplicaSink(replica).verify_absent(lineage(t, [copied.id]))).absent
    if replica.dialect == "postgresql":
        assert await _vacuums(replica) > vacuums  # the replica's own statistics: VACUUM ran on it


async def test_rows_purged_before_the_scrub_are_scrubbed_at_start(store: SqlStore) -> None:
    """A tombstone (and a deletion) written by an older release is reduced at worker start, once."""
    t = f"t-{uuid.uuid4().hex[:8]}"
    owner = f"alice{uuid.uuid4().hex[:8]}"
    old = await store.insert_memory(
        record(t, owner, "alice's old note", slot="notes.old", provenance=Provenance(session="s-old"))
    )
    now = datetime.now(UTC)
    async with store.transaction() as conn:
        await conn.execute(
            sa.update(memories)
            .where(memories.c.id == old.id)
            .values(content=None, content_hash="", status=Status.PURGED.value, purged_at=now)
        )
        await conn.execute(
            sa.insert(deletions).values(
                id=f"d-{uuid.uuid4().hex[:8]}",
                tenant_id=t,
                requester=f"user:{owner}",
                selector={"kind": "memory", "memory_id": old.id},
                status="verified",
                created_at=now,
                updated_at=now,
            )
        )
    forget = ForgetStore(store)
    assert await forget.scrub_purged() >= 2
    row = await store.get_memory(t, old.id)
    assert row is not None and row.slot is None and row.provenance.session is None
    assert row.owner_id == PSEUDONYMS.subject(t, owner)
    async with store.engine.connect() as conn:
        requesters = (await conn.execute(sa.select(deletions.c.requester).where(deletions.c.tenant_id == t))).scalars()
        assert list(requesters) == [PSEUDONYMS.actor(t, f"user:{owner}")]
    assert await forget.scrub_purged() == 0  # idempotent: nothing left to do
