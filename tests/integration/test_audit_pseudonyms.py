"""Person ids in audit events are keyed hashes, and batched appends chain exactly like single ones.

On SQLite and PostgreSQL (a fresh schema per test: the chain is global). The store applies the
pseudonyms on append, so whichever code builds an event, what lands is already pseudonymous, and
the chain covers the stored values (verification needs no key).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import sqlalchemy as sa

from memwarden.audit_signing import CheckpointSigner, CheckpointVerifier
from memwarden.forget import subject_hash, subject_key
from memwarden.stores.audit import AuditEventIn, Pseudonymizer, is_pseudonym
from memwarden.stores.sql import SqlStore
from tests.store_support import fresh_store

KEY = subject_key("pseudonym-test")
SEED = CheckpointSigner.generate_base64()
BASE = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
async def raw(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    """A store with no pseudonyms: what rows written before this change look like."""
    async with fresh_store(request.param, tmp_path, schema_prefix="mw_pseu") as s:
        yield s


def keyed(store: SqlStore, *, every: int | None = None) -> SqlStore:
    """The same database, opened as the service opens it: pseudonyms on (and a signer, if asked)."""
    signer = {"audit_signer": CheckpointSigner.from_base64(SEED), "checkpoint_every": every} if every else {}
    return SqlStore(store.engine, audit_pseudonyms=Pseudonymizer(KEY), **signer)  # type: ignore[arg-type]


def event(n: int, **kw: object) -> AuditEventIn:
    values: dict[str, object] = {
        "id": f"e-{n}",
        "at": BASE + timedelta(seconds=n),
        "tenant_id": "t1",
        "actor": "user:alice",
        "operation": "create",
        "memory_id": f"m-{n}",
        "namespace": "user:alice",
        "reason": "accepted",
    }
    values.update(kw)
    return AuditEventIn(**values)  # type: ignore[arg-type]


async def rows(store: SqlStore) -> list[tuple[object, ...]]:
    async with store.engine.connect() as conn:
        return [tuple(r) for r in (await conn.execute(sa.text("SELECT * FROM audit_events ORDER BY seq"))).all()]


def test_the_scheme_links_to_receipts_and_keeps_services_readable() -> None:
    p = Pseudonymizer(KEY)
    assert p.actor("t1", "user:alice") == f"user:~{subject_hash(KEY, 't1', 'user:alice')}"  # a receipt's requester_hash
    assert p.namespace("t1", "user:alice") == f"user:~{subject_hash(KEY, 't1', 'alice')}"  # its subject_hash
    assert p.namespace("t1", "agent:planner:alice") == f"agent:planner:~{subject_hash(KEY, 't1', 'alice')}"
    assert p.actor("t1", "operator:ops-1").startswith("operator:~") and p.actor("t1", "privacy:dpo") != "privacy:dpo"
    for service in ("system:retention", "agent:planner-svc"):
        assert p.actor("t1", service) == service
    assert p.namespace("t1", "shared:team") == "shared:team"
    assert p.namespace("t1", None) is None
    odd = p.namespace("t1", "alice")
    assert odd is not None and is_pseudonym(odd)  # an unknown shape is hashed whole, never kept
    # Per tenant, and idempotent: pseudonymizing a stored value again changes nothing.
    assert p.actor("t2", "user:alice") != p.actor("t1", "user:alice")
    assert p.actor("t1", p.actor("t1", "user:alice")) == p.actor("t1", "user:alice")
    assert p.namespace("t1", p.namespace("t1", "user:alice")) == p.namespace("t1", "user:alice")
    # Another key, other hashes: without the service's secret nothing links to a person.
    assert Pseudonymizer(subject_key("other")).actor("t1", "user:alice") != p.actor("t1", "user:alice")


async def test_appended_events_hold_no_raw_person_id_and_filters_still_find_them(raw: SqlStore) -> None:
    await raw.append_audit(event(1))  # written before pseudonyms: it stays as it is
    store = keyed(raw)
    await store.append_audit(event(2))
    await store.append_audit(event(3, actor="agent:planner-svc", namespace="agent:planner:alice"))
    await store.append_audit_many([event(4), event(5, actor="user:bob", namespace="shared:team")])
    stored = await rows(store)
    assert len(stored) == 5
    assert "alice" in str(stored[0]) and not [r for r in stored[1:] if "alice" in str(r)]
    assert "bob" not in str(stored[4]) and "shared:team" in str(stored[4])
    # The actor filter takes the clear id and finds both the old raw row and the new hashed ones.
    mine, _ = await store.list_audit("t1", actor="user:alice", oldest_first=True, limit=10, cursor=None)
    assert [e.id for e in mine] == ["e-1", "e-2", "e-4"]
    assert mine[1].actor == f"user:~{subject_hash(KEY, 't1', 'user:alice')}"
    agent, _ = await store.list_audit("t1", actor="agent:planner-svc", limit=10, cursor=None)
    assert [e.id for e in agent] == ["e-3"] and agent[
        0
    ].namespace == f"agent:planner:~{subject_hash(KEY, 't1', 'alice')}"
    by_memory, _ = await store.list_audit("t1", memory_id="m-4", limit=10, cursor=None)
    assert [e.id for e in by_memory] == ["e-4"]
    # The chain covers what is stored, so verification needs no key, and old and new rows verify together.
    assert await raw.verify_audit() == (True, None)
    assert await store.verify_audit() == (True, None)


async def test_a_batch_chains_and_checkpoints_exactly_as_single_appends_do(raw: SqlStore, tmp_path: Path) -> None:
    every = 3
    batch = keyed(raw, every=every)
    events = [event(n, actor=f"user:u{n % 3}") for n in range(1, 12)]
    await batch.append_audit(events[0])
    assert await batch.append_audit_many(events[1:8]) == 7
    # A retry of a batch that partly landed appends only what is new, in order.
    assert await batch.append_audit_many(events[5:11]) == 3
    assert await batch.append_audit_many(events) == 0
    verifier = CheckpointVerifier.from_base64([CheckpointSigner.from_base64(SEED).public_base64()])
    result = await batch.verify_audit_chain(verifier, require_every=every)
    assert result.ok and result.events == 11, result
    checkpoints = sorted(c.seq for c in await batch.list_checkpoints())

    async with fresh_store("sqlite", tmp_path / "one-by-one") as other:
        single = keyed(other, every=every)
        for e in events:
            await single.append_audit(e)
        assert sorted(c.seq for c in await single.list_checkpoints()) == checkpoints
        # Same events, same order, same hashes: the batch is not a different chain.
        assert [r[-1] for r in await rows(single)] == [r[-1] for r in await rows(batch)]

    # Tampering with a row a batch wrote is found at that row.
    async with batch.engine.begin() as conn:
        victim = await conn.scalar(sa.text("SELECT seq FROM audit_events WHERE id = 'e-6'"))
        await conn.execute(sa.text("UPDATE audit_events SET reason = 'edited' WHERE seq = :s"), {"s": victim})
    broken = await batch.verify_audit_chain(verifier, require_every=every)
    assert (broken.ok, broken.broken_seq, broken.reason) == (False, victim, "hash_mismatch")


async def test_an_erased_subject_leaves_no_readable_id_in_events_about_them(raw: SqlStore) -> None:
    """The audit side of erasure at store level: deletion events name the subject by hash only."""
    from memwarden.forget import OwnerSelector, redacted, selector_key
    from memwarden.records import MemoryRecord, MemoryType, SourceKind, content_hash
    from memwarden.stores.forget import ForgetStore

    store = keyed(raw)
    owner = f"person-{uuid.uuid4().hex[:8]}"
    at = datetime.now(UTC)
    for i in range(3):
        text = f"fact {i}"
        record = MemoryRecord(
            id=str(uuid.uuid4()),
            tenant_id="t1",
            owner_id=owner,
            type=MemoryType.FACT,
            content=text,
            content_hash=content_hash(text),
            source_kind=SourceKind.USER,
            reason="user_stated_fact",
            created_at=at,
            updated_at=at,
        )
        await store.commit_live(
            record,
            audit=lambda r: event(
                0, id=f"c-{r.id}"[:64], memory_id=r.id, actor=f"user:{owner}", namespace=f"user:{owner}"
            ),
        )
    selector = OwnerSelector(owner_id=owner)
    body = redacted(selector, KEY, "t1")
    _, created = await ForgetStore(store).begin(
        tenant_id="t1",
        requester=f"user:{owner}",
        selector=selector,
        redacted_selector=body,
        selector_key=selector_key("t1", body),
        reason="gdpr_art17",
        subject_hash=body["subject_hash"],
        now=at,
    )
    assert created
    stored = await rows(store)
    deletes = [r for r in stored if "delete" in r]
    assert len(stored) == 6 and len(deletes) == 3
    assert not [r for r in stored if owner in str(r)]
    assert all(f"user:~{body['subject_hash']}" in r for r in stored)
    assert await store.verify_audit() == (True, None)
