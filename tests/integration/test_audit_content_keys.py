"""No guessable content in the permanent log: content hashes keyed per subject, a key erasure destroys,
and none at all on rejections. SQLite and PostgreSQL stores; one end-to-end check through the API."""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from memwarden.forget import OwnerSelector, TenantSelector, redacted, selector_key, subject_key
from memwarden.records import content_hash
from memwarden.stores.audit import AuditEventIn, Pseudonymizer
from memwarden.stores.content_keys import keyed_hash, subject_keys
from memwarden.stores.forget import ForgetStore
from memwarden.stores.sql import SqlStore
from tests.integration.api_stack import Api
from tests.store_support import fresh_store

KEY = subject_key("content-keys-test-secret-0123456789abcdefghijklmnop")
DOOR = "the door code is 4711"


@pytest.fixture(params=["sqlite", "postgresql"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SqlStore]:
    async with fresh_store(request.param, tmp_path, audit_pseudonyms=Pseudonymizer(KEY)) as s:
        yield s


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def event(t: str, owner: str, digest: str, **fields: object) -> AuditEventIn:
    values: dict[str, object] = {
        "tenant_id": t,
        "actor": f"user:{owner}",
        "operation": "create",
        "memory_id": str(uuid.uuid4()),
        "namespace": f"user:{owner}",
        "hash_after": digest,
        "details": {"content_hash": digest, "type": "fact"},
    }
    return AuditEventIn(**(values | fields))  # type: ignore[arg-type]


def guessable(stored: str | None) -> bool:
    """Whether a brute force over every 4-digit code finds the stored hash (what an attacker would do)."""
    return stored in {content_hash(f"the door code is {n:04d}") for n in range(10_000)}


async def erase(store: SqlStore, t: str, selector: OwnerSelector | TenantSelector) -> None:
    body = redacted(selector, KEY, t)
    await ForgetStore(store).begin(
        tenant_id=t,
        requester="privacy:dpo",
        selector=selector,
        redacted_selector=body,
        selector_key=selector_key(t, body),
        reason="test",
        subject_hash=body.get("subject_hash"),
        now=datetime.now(UTC),
    )


async def test_content_hashes_are_keyed_per_subject_and_erasure_destroys_the_key(store: SqlStore) -> None:
    t = tenant()
    digest = content_hash(DOOR)
    await store.append_audit(event(t, "alice", digest))
    await store.append_audit_many([event(t, "alice", digest), event(t, "bob", digest)])
    stored, _ = await store.list_audit(t, limit=10, cursor=None)
    by_owner = {e.namespace: e for e in stored}
    assert len(stored) == 3 and len(by_owner) == 2
    for e in stored:
        assert e.hash_after != digest and not guessable(e.hash_after) and not guessable(e.details["content_hash"])
        assert e.details["content_hash"] == e.hash_after
    alice_namespace = Pseudonymizer(KEY).namespace(t, "user:alice")
    alice = next(e for e in stored if e.namespace == alice_namespace)
    assert {e.hash_after for e in stored if e.namespace == alice_namespace} == {alice.hash_after}  # stable per subject
    bob = next(e for e in stored if e.namespace != alice.namespace)
    assert bob.hash_after != alice.hash_after  # another subject, another key
    # With the key, an auditor checks an event against a memory's content.
    assert await store.content_keys.keyed(t, "alice", digest) == alice.hash_after
    assert await store.verify_audit() == (True, None)

    await erase(store, t, OwnerSelector(owner_id="alice"))
    assert await store.content_keys.keyed(t, "alice", digest) is None
    assert await store.content_keys.keyed(t, "bob", digest) == bob.hash_after
    async with store.engine.connect() as conn:
        keys = (await conn.execute(sa.select(subject_keys.c.key).where(subject_keys.c.tenant_id == t))).scalars()
        left = [bytes(k) for k in keys]
    assert len(left) == 1 and keyed_hash(left[0], digest) == bob.hash_after
    assert all(keyed_hash(k, digest) != alice.hash_after for k in left)  # nothing left reproduces alice's
    assert await store.verify_audit() == (True, None)  # the chain is untouched by the erasure
    # A new event for alice after erasure gets a new key: it links to nothing before.
    await store.append_audit(event(t, "alice", digest))
    assert await store.content_keys.keyed(t, "alice", digest) not in (None, alice.hash_after)

    await erase(store, t, TenantSelector())
    async with store.engine.connect() as conn:
        count = await conn.scalar(sa.select(sa.func.count()).where(subject_keys.c.tenant_id == t))
    assert count == 0


async def test_a_shared_stores_event_is_keyed_under_the_memorys_owner(store: SqlStore) -> None:
    from tests.integration.test_sql_store_contract import make_record

    t = tenant()
    record = await store.insert_memory(make_record(t, owner_id="carol", scope="shared", store="team"))
    digest = record.content_hash
    await store.append_audit(
        event(t, "carol", digest, namespace="shared:team").model_copy(update={"memory_id": record.id})
    )
    [stored], _ = await store.list_audit(t, limit=5, cursor=None)
    assert stored.namespace == "shared:team" and stored.hash_after == await store.content_keys.keyed(t, "carol", digest)


async def test_without_a_subject_to_key_by_nothing_is_stored(store: SqlStore, tmp_path: Path) -> None:
    t = tenant()
    digest = content_hash(DOOR)
    orphan = event(t, "x", digest, namespace="shared:nobody")
    await store.append_audit(orphan)
    [stored], _ = await store.list_audit(t, limit=5, cursor=None)
    assert stored.hash_after is None and "content_hash" not in stored.details
    async with fresh_store("sqlite", tmp_path / "bare") as bare:  # no secret to name subjects by
        await bare.append_audit(event(t, "alice", digest))
        [plain], _ = await bare.list_audit(t, limit=5, cursor=None)
        assert plain.hash_after is None and "content_hash" not in plain.details


async def test_a_rejected_secret_leaves_no_hash_in_the_log(api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()
    alice = api.auth(t, "alice")
    fact = {"type": "fact", "source_kind": "user", "reason": "user_stated_fact"}
    for secret in (DOOR, "the deploy key is AKIAZ7QXW3SYNTH5EXMP, keep it handy"):
        answer = await http.post("/v1/memories", headers=alice, json=fact | {"content": secret})
        assert answer.status_code == 200 and answer.json()["decision"] == "REJECT", answer.text
    stored = "synthetic: alice's favourite number is 4711"
    kept = await http.post("/v1/memories", headers=alice, json=fact | {"content": stored})
    assert kept.status_code == 200 and kept.json()["decision"] == "ADD", kept.text
    events, _ = await api.store.list_audit(t, limit=10, cursor=None)
    denied = [e for e in events if e.operation == "deny"]
    assert len(denied) == 2
    for deny in denied:
        assert deny.hash_before is None and deny.hash_after is None and "content_hash" not in deny.details
    [create] = [e for e in events if e.operation == "create"]
    assert create.hash_after == await api.store.content_keys.keyed(t, "alice", content_hash(stored))
    text = json.dumps([e.model_dump(mode="json") for e in events])
    for candidate in (DOOR, stored):
        assert hashlib.sha256(candidate.encode()).hexdigest() not in text
    assert not any(guessable(e.hash_after) or guessable(e.details.get("content_hash")) for e in events)
