"""Forget end to end on the embedded profile, over real HTTP: tombstone, fan-out, verification, receipt.

One stack per module (Temporal dev server, the production worker over SQLite + Qdrant Edge + the
in-process cache, a SQLite replica outside the data dir, the API under uvicorn). Each test has its
own tenant. Memories are seeded through the store's commit (store, index, replicas), plus one
through `POST /v1/memories`, so the whole write path is covered too.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from memwarden.forget import (
    MemorySelector,
    receipt_hash,
    selector_key,
    subject_hash,
    subject_key,
    subject_ref_prefix,
)
from memwarden.identity import Principal, Role, read_filter
from memwarden.keys import Purpose
from memwarden.records import ForgetInput, MemoryType, RetrieveInput, Scope, SourceRef, Status
from memwarden.sinks import CACHE, STORE_CONTENT, SUMMARIES, VECTOR_INDEX
from memwarden.stores.cache import owner_prefix, search_key
from memwarden.stores.forget import ForgetStore
from memwarden.stores.replicas import replica_name
from memwarden.stores.sql_models import candidates, memories
from memwarden.stores.subjects import resolve_handle
from memwarden.stores.summaries import claim_summary_request, park_summary_request
from tests.forget_support import (
    Stack,
    an_hour_ago,
    decoded_histories_containing,
    embedded_stack,
    scan,
    seed,
    tenant,
    wait_verified,
)
from workflows.retrieve import RetrieveWorkflow
from workflows.summarize import SummarizeWorkflow


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    data_dir = tmp_path_factory.mktemp("forget-data")
    replica = tmp_path_factory.mktemp("forget-replica") / "replica.db"
    async with embedded_stack(data_dir, replica_urls=[f"sqlite+aiosqlite:///{replica}"]) as s:
        yield s


@pytest.fixture
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30.0) as client:
        yield client


async def search_ids(http: httpx.AsyncClient, headers: dict[str, str], query: str) -> list[str]:
    answer = await http.post("/v1/search", json={"query": query, "k": 10}, headers=headers)
    assert answer.status_code == 200, answer.text
    return [r["memory_id"] for r in answer.json()["results"]]


async def test_delete_memory_tombstones_at_once_then_every_sink_verifies(stack: Stack, http: httpx.AsyncClient) -> None:
    t = tenant()
    alice = stack.auth(t, "alice")
    marker = f"quokka{uuid.uuid4().hex[:10]}"
    old = await seed(stack.deps, t, "alice", f"alice sits by the {marker} window on trains", slot="travel.seat")
    new = await seed(stack.deps, t, "alice", f"alice sits by the {marker} aisle on trains", slot="travel.seat")
    other = await seed(stack.deps, t, "alice", "alice drinks green tea in the morning")
    assert (await stack.deps.store.get_memory(t, old.id)).status is Status.SUPERSEDED  # type: ignore[union-attr]
    found = await search_ids(http, alice, f"{marker} seat on trains")
    assert new.id in found and old.id not in found
    cached = search_key(t, "alice", "a" * 64, "b" * 64)
    await stack.deps.cache.set(cached, b"[]", 60)

    answer = await http.delete(f"/v1/memories/{new.id}", headers=alice)
    assert answer.status_code == 202, answer.text
    accepted = answer.json()
    assert accepted["status"] == "tombstoned" and accepted["workflow_id"] == f"forget-{accepted['deletion_id']}"
    # Before any sink ran, the tombstone already holds: the whole slot chain, and no search returns it.
    for mid in (old.id, new.id):
        record = await stack.deps.store.get_memory(t, mid)
        assert record is not None and record.status in (Status.TOMBSTONED, Status.PURGED)
    assert new.id not in await search_ids(http, alice, f"{marker} seat on trains")

    receipt = await wait_verified(http, accepted["deletion_id"], alice)
    names = {s["name"] for s in receipt["sinks"]}
    assert names == {VECTOR_INDEX, CACHE, SUMMARIES, STORE_CONTENT, stack.deps.replicas[0].name}
    for sink in receipt["sinks"]:
        assert sink["status"] == "verified" and sink["verified_at"], sink
        assert sink["evidence"]["absent"] is True and sink["evidence"]["remaining"] == 0
        assert sink["workflow_id"] == accepted["workflow_id"] and sink["run_id"] and sink["started_at"]
    assert receipt["counts"]["memories"] == 2
    key = subject_key(stack.settings.auth_secret_value)
    assert receipt["subject_hash"] == subject_hash(key, t, "alice")
    assert "alice" not in str(receipt["selector"]) and "alice" not in (receipt["subject_hash"] or "")

    for mid in (old.id, new.id):
        record = await stack.deps.store.get_memory(t, mid)
        assert record is not None
        assert (record.status, record.content, record.content_hash) == (Status.PURGED, None, "")
        assert record.purged_at is not None and record.tombstoned_at is not None
        copy = await stack.deps.replicas[0].get(mid)
        assert copy is not None and copy["content"] is None and copy["status"] == "purged"
    assert await stack.deps.index.present([old.id, new.id]) == []
    assert await stack.deps.cache.keys_with_prefix(owner_prefix(t, "alice")) == []
    # Untouched: the other memory is still there, everywhere.
    assert (await stack.deps.store.get_memory(t, other.id)).content is not None  # type: ignore[union-attr]
    assert await stack.deps.index.present([other.id]) == [other.id]

    # The receipt is in the hash chain, and the chain still verifies.
    events, _ = await stack.deps.store.list_audit(t, limit=20, cursor=None)
    receipts = [e for e in events if e.operation == "forget_receipt"]
    assert len(receipts) == 1 and receipts[0].deletion_id == accepted["deletion_id"]
    assert receipts[0].details["receipt_hash"] == receipt["receipt_hash"] and len(receipt["receipt_hash"]) == 64
    # The receipt as hashed is served too: anyone can recompute the hash; any change to it shows.
    assert receipt_hash(receipt["receipt"]) == receipt["receipt_hash"]
    tampered = {**receipt["receipt"], "counts": {**receipt["receipt"]["counts"], "memories": 1}}
    assert receipt_hash(tampered) != receipt["receipt_hash"]
    assert receipt["receipt"]["request"]["requester_role"] == "user"
    assert "alice" not in str(receipt["receipt"])
    # Each memory's own audit record ends with its deletion, pseudonymous the receipts' way.
    for mid in (old.id, new.id):
        history, _ = await stack.deps.store.list_audit(t, memory_id=mid, limit=1, cursor=None)
        [deleted] = history
        assert (deleted.operation, deleted.deletion_id, deleted.reason) == (
            "delete",
            accepted["deletion_id"],
            "owner_request",
        )
        assert deleted.actor == f"user:~{receipt['receipt']['request']['requester_hash']}"
        assert deleted.namespace == f"user:~{receipt['subject_hash']}"
    by_actor, _ = await stack.deps.store.list_audit(t, actor="user:alice", operation="delete", limit=5, cursor=None)
    assert {e.memory_id for e in by_actor} == {old.id, new.id}
    assert await stack.deps.store.verify_audit() == (True, None)

    again = await http.delete(f"/v1/memories/{new.id}", headers=alice)
    assert again.status_code == 202 and again.json()["deletion_id"] == accepted["deletion_id"]
    assert again.json()["status"] == "verified"
    also = await http.delete(f"/v1/memories/{old.id}", headers=alice)
    assert also.json()["deletion_id"] == accepted["deletion_id"]


_DIGITS_TO_LETTERS = str.maketrans("0123456789", "ghijklmnop")


def letters(n: int) -> str:
    """`n` random lowercase letters (a uuid's hex with its digits mapped to letters)."""
    return uuid.uuid4().hex[:n].translate(_DIGITS_TO_LETTERS)


async def test_owner_erasure_leaves_no_byte_of_the_marker_in_the_data_dir(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    t = tenant()
    # Unique letters, never a run of digits: ten random hex digits are all decimal about once in a
    # hundred draws, and then read as a phone number (PII), which refuses the write.
    marker = f"zeppelin{letters(12)}"
    owner = f"alice{letters(10)}"  # unique, so a hit anywhere below is this person's id
    speaker = f"Quillon{letters(10)}"  # who said it: a name, content-class like the text
    session = f"sess{letters(10)}"  # a conversation's id: a tombstone keeps none
    slot = f"bike.{letters(10)}"  # what the memory was about
    record_key = f"ticket{letters(10)}"  # a source record's key (a ticket, a patient number)
    alice = stack.auth(t, owner)
    agent = stack.auth(t, "svc", role="agent", agent="planner", on_behalf_of=owner)
    # One write through the API's whole path (claim check, RememberWorkflow, commit).
    posted = await http.post(
        "/v1/memories",
        json={
            "content": f"alice keeps her {marker} bicycle in the hallway",
            "type": "fact",
            "source_kind": "user",
            "reason": "user_stated_fact",
            "slot": slot,
            "provenance": {"session": session, "turn": "D1:4", "speaker": speaker},
        },
        headers=alice,
    )
    assert posted.status_code == 200 and posted.json()["decision"] == "ADD", posted.text
    ids = [posted.json()["memory_id"]]
    # A secret she proposed is rejected before it is parked: no file ever held it, before or after.
    secret = "AKIA" + uuid.uuid4().hex[:16].upper().replace("0", "Q").replace("1", "Z")
    refused = await http.post(
        "/v1/memories",
        json={
            "content": f"alice's key is {secret}",
            "type": "fact",
            "source_kind": "user",
            "reason": "user_stated_fact",
        },
        headers=alice,
    )
    assert (refused.json()["decision"], refused.json()["reason"]) == ("REJECT", "secret_detected"), refused.text
    cited = await seed(
        stack.deps, t, owner, "alice's bicycle is insured", source_ref=SourceRef(system="crm", key=record_key)
    )
    ids.append(cited.id)
    for i in range(3):
        ids.append(
            (
                await seed(
                    stack.deps, t, owner, f"{marker} episode {i}: alice rode to the lake.", type=MemoryType.EPISODIC
                )
            ).id
        )
    ids.append(
        (
            await seed(
                stack.deps,
                t,
                owner,
                f"planner notes alice likes {marker} routes",
                scope=Scope.AGENT,
                agent_id="planner",
            )
        ).id
    )
    bob = await seed(stack.deps, t, "bob", "bob keeps his bicycle in the shed")
    # Retention runs over one of hers first, so a RetentionWorkflow (and its child ForgetWorkflow) of
    # this owner is in the namespace for the history check below.
    lapsing = await seed(
        stack.deps, t, owner, "alice's train leaves at nine", expires_in=timedelta(seconds=1), at=an_hour_ago()
    )
    from workflows.retention import RetentionWorkflow

    await stack.client.execute_workflow(
        RetentionWorkflow.run, id=f"retention-{uuid.uuid4()}", task_queue=stack.settings.temporal_task_queue
    )
    assert (await stack.deps.store.get_memory(t, lapsing.id)).status is Status.EXPIRED  # type: ignore[union-attr]
    key = stack.settings.key_for(Purpose.SUBJECT_HANDLES)  # handles are named under their own key
    summary = await stack.client.execute_workflow(
        SummarizeWorkflow.run,
        await park_summary_request(stack.deps.store, key, tenant_id=t, owner_id=owner, actor=f"user:{owner}"),
        id=f"summarize-{uuid.uuid4()}",
        task_queue=stack.settings.temporal_task_queue,
    )
    assert summary.summary_id and summary.derived_from == 3
    assert marker in ((await stack.deps.store.get_memory(t, summary.summary_id)).content or "")  # type: ignore[union-attr]
    # A second handle parked for the owner, never used: the erasure must take it too.
    unused = await park_summary_request(stack.deps.store, key, tenant_id=t, owner_id=owner, actor="system:test")
    assert ids[0] in await search_ids(http, alice, f"where is the {marker} bicycle")
    assert await search_ids(http, agent, f"{marker} routes")
    # The controls: before erasure the marker is on disk, and the write's and the searches' histories
    # hold subject handles that resolve to the owner, so the zeros below mean something.
    assert scan(stack.settings.data_dir, marker.encode())
    for left in (speaker, session, slot, record_key, owner):
        assert scan(stack.settings.data_dir, left.encode()), left
    assert (await stack.deps.store.get_memory(t, ids[0])).provenance.speaker == speaker  # type: ignore[union-attr]
    # Kept out of history as the owner is (the subject handle carries it to the commit).
    assert await decoded_histories_containing(stack.client, speaker.encode()) == []
    prefix = subject_ref_prefix(subject_hash(key, t, owner))
    handled = await decoded_histories_containing(stack.client, prefix.encode())
    assert any(w.startswith("remember-") for w in handled) and any(w.startswith("retrieve-") for w in handled)
    assert await decoded_histories_containing(stack.client, owner.encode()) == []
    async with stack.deps.store.engine.connect() as conn:
        refs = (await conn.execute(sa.select(candidates.c.ref).where(candidates.c.ref.like(f"{prefix}%")))).scalars()
        parked = list(refs)
    assert parked and all([await resolve_handle(stack.deps.store, r) for r in parked])
    # The API write reached the replica through the commit path itself (seeded ones through `seed`).
    posted_copy = await stack.deps.replicas[0].get(ids[0])
    assert posted_copy is not None and marker in (posted_copy["content"] or "")
    assert scan(Path(make_url(stack.settings.replica_urls[0]).database or "").parent, marker.encode())

    answer = await http.post(
        "/v1/forget", json={"selector": {"kind": "owner", "owner_id": owner}, "reason": "gdpr_art17"}, headers=alice
    )
    assert answer.status_code == 202, answer.text
    receipt = await wait_verified(http, answer.json()["deletion_id"], alice)
    assert receipt["counts"]["memories"] == len(ids) + 1  # the summary is alice's too
    assert receipt["selector"] == {"kind": "owner", "subject_hash": receipt["subject_hash"]}

    assert scan(stack.settings.data_dir, marker.encode()) == []
    assert scan(stack.settings.data_dir, speaker.encode()) == []  # the speaker went with the content
    # So did what the rows said about it: the slot, the cited record's key, the conversation's ids; and
    # the owner (a tombstone's owner and the deletion's requester are keyed pseudonyms).
    for left in (session, slot, record_key, owner):
        assert scan(stack.settings.data_dir, left.encode()) == [], left
    assert scan(stack.settings.data_dir, secret.encode()) == []  # the rejected secret never reached a file
    replica_dir = Path(make_url(stack.settings.replica_urls[0]).database or "").parent
    assert scan(replica_dir, marker.encode()) == []  # the replica's file too
    assert scan(replica_dir, owner.encode()) == [] and scan(replica_dir, slot.encode()) == []
    # Nor is it readable in any workflow history, even decoded with the codec key from the data dir.
    assert await decoded_histories_containing(stack.client, marker.encode()) == []
    # The owner's id is in no history at all (every workflow carries handles and ids), and every handle
    # that named her is gone with her, so those histories resolve to nobody.
    assert await decoded_histories_containing(stack.client, owner.encode()) == []
    ran = {e.id.split("-", 1)[0] async for e in stack.client.list_workflows()}
    assert {"remember", "retrieve", "summarize", "forget", "retention"} <= ran  # they were there to be checked
    assert [r for r in parked if await resolve_handle(stack.deps.store, r) is not None] == []
    # The audit log holds every decision about her, and not one readable id of hers.
    async with stack.deps.store.engine.connect() as conn:
        rows = (await conn.execute(sa.text("SELECT * FROM audit_events WHERE tenant_id = :t"), {"t": t})).all()
    assert len(rows) >= len(ids) + 3 and not [r for r in rows if owner in str(tuple(r))]
    assert not [r for r in rows if speaker in str(tuple(r))]
    assert await stack.deps.store.verify_audit() == (True, None)
    # The summary's handles are gone with her: a replay of that workflow's input resolves to nobody.
    assert await claim_summary_request(stack.deps.store, unused) is None
    for mid in [*ids, summary.summary_id]:
        record = await stack.deps.store.get_memory(t, mid)
        assert record is not None and record.status is Status.PURGED and record.content is None
        assert record.provenance.speaker is None and record.provenance.session is None
        assert record.slot is None and record.source_ref is None and record.owner_id != owner
    # The person still reads their tombstone (their pseudonym is matched with the key), and the receipt.
    mine = await http.get(f"/v1/memories/{ids[0]}", headers=alice)
    assert mine.status_code == 200 and mine.json()["status"] == "purged" and mine.json()["owner_id"] == owner
    assert (await stack.deps.store.get_memory(t, bob.id)).content is not None  # type: ignore[union-attr]
    assert await search_ids(http, alice, f"where is the {marker} bicycle") == []


async def test_forgetting_a_source_of_a_summary_rederives_it(stack: Stack, http: httpx.AsyncClient) -> None:
    t = tenant()
    marker = f"marmot{uuid.uuid4().hex[:10]}"
    alice = stack.auth(t, "alice")
    keep1 = await seed(stack.deps, t, "alice", "alice walked the dog at dawn. It rained.", type=MemoryType.EPISODIC)
    doomed = await seed(
        stack.deps, t, "alice", f"alice visited the {marker} clinic. Private.", type=MemoryType.EPISODIC
    )
    keep2 = await seed(stack.deps, t, "alice", "alice baked bread on sunday.", type=MemoryType.EPISODIC)
    first = await stack.client.execute_workflow(
        SummarizeWorkflow.run,
        await park_summary_request(
            stack.deps.store,
            subject_key(stack.settings.auth_secret_value),
            tenant_id=t,
            owner_id="alice",
            actor="system:test",
        ),
        id=f"summarize-{uuid.uuid4()}",
        task_queue=stack.settings.temporal_task_queue,
    )
    old = await stack.deps.store.get_memory(t, first.summary_id)  # type: ignore[arg-type]
    assert old is not None and marker in (old.content or "") and old.slot == "summary.episodic"

    answer = await http.delete(f"/v1/memories/{doomed.id}", headers=alice)
    receipt = await wait_verified(http, answer.json()["deletion_id"], alice)
    summaries = next(s for s in receipt["sinks"] if s["name"] == SUMMARIES)
    assert summaries["purged"] == 1

    old = await stack.deps.store.get_memory(t, first.summary_id)  # type: ignore[arg-type]
    assert old is not None and old.status is Status.PURGED and old.content is None
    assert await stack.deps.index.present([old.id]) == []
    alice_reads = read_filter(Principal(tenant=t, sub="alice", role=Role.USER), types=(MemoryType.SUMMARY,))
    page, _ = await stack.deps.store.list_memories(alice_reads, limit=10, cursor=None)
    assert len(page) == 1 and page[0].id != old.id
    assert marker not in (page[0].content or "") and "baked bread" in (page[0].content or "")
    async with stack.deps.store.engine.connect() as conn:
        lineage = await conn.scalar(sa.select(memories.c.derived_from).where(memories.c.id == page[0].id))
    assert sorted(lineage) == sorted([keep1.id, keep2.id])


async def test_source_selector_purges_and_quarantines(stack: Stack, http: httpx.AsyncClient) -> None:
    t = tenant()
    ref = SourceRef(system="crm", key="rec-42", version="v1")
    hit = [await seed(stack.deps, t, o, f"crm says {o} is on plan gold", source_ref=ref) for o in ("alice", "bob")]
    spared = await seed(stack.deps, t, "alice", "crm says plan silver", source_ref=SourceRef(system="crm", key="rec-7"))
    ops = stack.auth(t, "ops-1", role="operator")
    forget = ForgetStore(stack.deps.store)
    assert not await forget.is_quarantined(t, "crm", "rec-42")
    answer = await http.post(
        "/v1/forget",
        json={"selector": {"kind": "source", "system": "crm", "key": "rec-42"}, "reason": "poisoning"},
        headers=ops,
    )
    assert answer.status_code == 202, answer.text
    receipt = await wait_verified(http, answer.json()["deletion_id"], ops)
    assert receipt["counts"]["memories"] == 2 and "rec-42" not in str(receipt)
    assert await forget.is_quarantined(t, "crm", "rec-42")
    for record in hit:
        assert (await stack.deps.store.get_memory(t, record.id)).status is Status.PURGED  # type: ignore[union-attr]
    assert (await stack.deps.store.get_memory(t, spared.id)).status is Status.ACTIVE  # type: ignore[union-attr]


async def test_the_four_outcomes_stay_distinct(stack: Stack, http: httpx.AsyncClient) -> None:
    t = tenant()
    alice = stack.auth(t, "alice")
    ineligible = await seed(stack.deps, t, "alice", "alice lived in porto", slot="home.city")
    await seed(stack.deps, t, "alice", "alice lives in lisbon", slot="home.city")
    quarantined = await seed(stack.deps, t, "alice", "alice likes jazz")
    await stack.deps.store.set_status(t, quarantined.id, Status.QUARANTINED, now=quarantined.created_at)
    expired = await seed(
        stack.deps, t, "alice", "alice's parcel arrives friday", expires_in=timedelta(seconds=1), at=an_hour_ago()
    )
    purged = await seed(stack.deps, t, "alice", "alice's old phone model")

    ops = stack.auth(t, "ops", role="operator")
    sweep = await http.post("/v1/forget", json={"selector": {"kind": "expired"}, "reason": "retention"}, headers=ops)
    assert sweep.status_code == 202, sweep.text
    swept = await wait_verified(http, sweep.json()["deletion_id"], ops)
    assert swept["counts"]["memories"] == 1
    gone = await http.delete(f"/v1/memories/{purged.id}", headers=alice)
    await wait_verified(http, gone.json()["deletion_id"], alice)

    seen = {}
    for name, record in {
        "ineligible": ineligible,
        "quarantined": quarantined,
        "expired": expired,
        "purged": purged,
    }.items():
        body = (await http.get(f"/v1/memories/{record.id}", headers=alice)).json()
        seen[name] = (body["status"], body["content"] is None, body["purged_at"] is not None)
    assert seen == {
        "ineligible": ("superseded", False, False),
        "quarantined": ("quarantined", False, False),
        "expired": ("expired", True, True),
        "purged": ("purged", True, True),
    }
    assert await stack.deps.index.present([expired.id, purged.id]) == []


async def test_an_agent_forgets_its_own_store_and_nothing_else(stack: Stack, http: httpx.AsyncClient) -> None:
    """docs/decisions/agents-forget-their-own-store.md: its private store, yes; its user's memory, 403;
    another agent's store, 404 (existence is not revealed)."""
    t = tenant()
    note = await seed(stack.deps, t, "alice", "alice likes terse replies", scope=Scope.AGENT, agent_id="planner")
    other = await seed(stack.deps, t, "alice", "alice likes long replies", scope=Scope.AGENT, agent_id="writer")
    users = await seed(stack.deps, t, "alice", "alice collects stamps")
    agent = stack.auth(t, "svc", role="agent", agent="planner", on_behalf_of="alice")
    refused = await http.delete(f"/v1/memories/{users.id}", headers=agent)
    assert refused.status_code == 403 and refused.json()["code"] == "not_own_store"
    assert (await http.delete(f"/v1/memories/{other.id}", headers=agent)).status_code == 404
    by_selector = await http.post(
        "/v1/forget", json={"selector": {"kind": "memory", "memory_id": users.id}, "reason": "x"}, headers=agent
    )
    assert by_selector.status_code == 403 and by_selector.json()["code"] == "not_own_store"
    slot = {"kind": "slot", "owner_id": "alice", "slot": "x"}
    assert (await http.post("/v1/forget", json={"selector": slot, "reason": "x"}, headers=agent)).status_code == 403
    answer = await http.delete(f"/v1/memories/{note.id}", headers=agent)
    assert answer.status_code == 202, answer.text
    receipt = await wait_verified(http, answer.json()["deletion_id"], agent)  # the requester reads its receipt
    assert receipt["counts"]["memories"] == 1
    alice = stack.auth(t, "alice")
    statuses = {
        m.id: (await http.get(f"/v1/memories/{m.id}", headers=alice)).json()["status"] for m in (note, other, users)
    }
    assert statuses == {note.id: "purged", other.id: "active", users.id: "active"}


async def test_who_may_forget_what(stack: Stack, http: httpx.AsyncClient) -> None:
    t = tenant()
    mine = await seed(stack.deps, t, "alice", "alice collects stamps")
    bob = stack.auth(t, "bob")
    agent = stack.auth(t, "svc", role="agent", agent="planner", on_behalf_of="alice")
    ops = stack.auth(t, "ops", role="operator")
    privacy = stack.auth(t, "dpo", role="privacy")
    assert (await http.delete(f"/v1/memories/{mine.id}", headers=bob)).status_code == 404
    assert (await http.delete(f"/v1/memories/{mine.id}", headers=agent)).status_code == 403
    assert (await http.delete(f"/v1/memories/{uuid.uuid4()}", headers=stack.auth(t, "alice"))).status_code == 404
    other_tenant = stack.auth(tenant(), "alice")
    assert (await http.delete(f"/v1/memories/{mine.id}", headers=other_tenant)).status_code == 404

    async def post(headers: dict[str, str], selector: dict[str, object]) -> httpx.Response:
        return await http.post("/v1/forget", json={"selector": selector, "reason": "test"}, headers=headers)

    denied = await post(bob, {"kind": "owner", "owner_id": "alice"})
    assert denied.status_code == 403 and denied.json()["errors"][0]["field"] == "selector.owner_id"
    assert (await post(ops, {"kind": "tenant"})).status_code == 403
    assert (await post(agent, {"kind": "owner", "owner_id": "alice"})).status_code == 403
    bad = await post(privacy, {"kind": "everything"})
    assert bad.status_code == 422 and bad.headers["content-type"].startswith("application/problem+json")
    assert "selector" in bad.json()["errors"][0]["field"]
    noreason = await http.post("/v1/forget", json={"selector": {"kind": "tenant"}}, headers=privacy)
    assert noreason.status_code == 422 and noreason.json()["errors"][0]["field"] == "reason"

    done = await post(privacy, {"kind": "tenant"})
    assert done.status_code == 202
    receipt = await wait_verified(http, done.json()["deletion_id"], privacy)
    assert receipt["scope"] == "tenant" and receipt["counts"]["memories"] == 1
    # The receipt: the requester and privacy/operators of the tenant; nobody else, not even by id.
    assert (await http.get(f"/v1/deletions/{done.json()['deletion_id']}", headers=ops)).status_code == 200
    assert (await http.get(f"/v1/deletions/{done.json()['deletion_id']}", headers=bob)).status_code == 404
    elsewhere = stack.auth(tenant(), "dpo", role="privacy")
    assert (await http.get(f"/v1/deletions/{done.json()['deletion_id']}", headers=elsewhere)).status_code == 404
    # The same request twice: the same deletion.
    twice = await post(privacy, {"kind": "tenant"})
    assert twice.status_code == 202 and twice.json()["deletion_id"] == done.json()["deletion_id"]


async def test_agent_store_selector_and_the_python_client(stack: Stack) -> None:
    from memwarden.client import MemwardenClient

    t = tenant()
    planner = [
        await seed(stack.deps, t, o, f"planner note {o}", scope=Scope.AGENT, agent_id="planner")
        for o in ("alice", "bob")
    ]
    coach = await seed(stack.deps, t, "alice", "coach note about alice", scope=Scope.AGENT, agent_id="coach")
    own = await seed(stack.deps, t, "alice", "alice's own memory")
    token = stack.auth(t, "ops", role="operator")["Authorization"].removeprefix("Bearer ")
    async with MemwardenClient(stack.base_url, token) as mw:
        accepted = await mw.forget({"kind": "agent", "agent_id": "planner"}, reason="agent_decommissioned")
        deadline = asyncio.get_running_loop().time() + 60
        while (receipt := await mw.deletion(accepted["deletion_id"]))["status"] != "verified":
            assert asyncio.get_running_loop().time() < deadline, receipt
            await asyncio.sleep(0.2)
    assert receipt["counts"]["memories"] == 2 and receipt["scope"] == "agent"
    for r in planner:
        assert (await stack.deps.store.get_memory(t, r.id)).status is Status.PURGED  # type: ignore[union-attr]
    for r in (coach, own):
        assert (await stack.deps.store.get_memory(t, r.id)).status is Status.ACTIVE  # type: ignore[union-attr]


def test_replica_name_hides_the_password() -> None:
    name = replica_name("postgresql+asyncpg://u:s3cret@db.example/replica")
    assert name.startswith("replica:") and "s3cret" not in name
    assert name == replica_name("postgresql+asyncpg://u:other@db.example/replica")


async def test_the_history_check_can_see_a_query_passed_in_the_clear(stack: Stack) -> None:
    """The control for the check above: a query put straight into RetrieveInput is found decoded."""
    t = tenant()
    marker = f"ocelot{uuid.uuid4().hex[:10]}"
    request = RetrieveInput(
        query=f"the {marker} question",
        k=3,
        read_filter=read_filter(Principal(tenant=t, sub="alice", role=Role.USER)),
        actor="user:alice",
    )
    wid = f"retrieve-{uuid.uuid4()}"
    await stack.client.execute_workflow(
        RetrieveWorkflow.run, request, id=wid, task_queue=stack.settings.temporal_task_queue
    )
    assert await decoded_histories_containing(stack.client, marker.encode()) == [wid]
    assert scan(stack.settings.data_dir, marker.encode()) == []  # encrypted at rest all the same


async def test_retention_sweep_expires_through_forget_and_the_schedule_exists(stack: Stack) -> None:
    from worker.schedules import RETENTION_SCHEDULE_ID, ensure_retention_schedule
    from workflows.retention import RetentionWorkflow

    t = tenant()
    lapsing = await seed(
        stack.deps, t, "alice", "alice's train leaves at nine", expires_in=timedelta(seconds=1), at=an_hour_ago()
    )
    lasting = await seed(stack.deps, t, "alice", "alice prefers trains")
    swept = await stack.client.execute_workflow(
        RetentionWorkflow.run, id=f"retention-{uuid.uuid4()}", task_queue=stack.settings.temporal_task_queue
    )
    assert swept >= 1
    record = await stack.deps.store.get_memory(t, lapsing.id)
    assert record is not None and record.status is Status.EXPIRED and record.content is None and record.purged_at
    assert (await stack.deps.store.get_memory(t, lasting.id)).status is Status.ACTIVE  # type: ignore[union-attr]
    assert await stack.deps.index.present([lapsing.id]) == []
    events, _ = await stack.deps.store.list_audit(t, limit=10, cursor=None)
    assert {e.operation for e in events} >= {"forget_requested", "forget_receipt"}
    assert all(e.reason == "retention_expired" for e in events if e.operation.startswith("forget"))
    # The expiry itself, on the memory's own record: `audit show` ends with it (no content, no person).
    history, _ = await stack.deps.store.list_audit(t, memory_id=lapsing.id, oldest_first=True, limit=10, cursor=None)
    expire = history[-1]
    assert (expire.operation, expire.actor, expire.reason) == ("expire", "system:retention", "retention_expired")
    assert expire.deletion_id and expire.details == {"selector": "expired", "prior_status": "active"}
    assert expire.namespace and expire.namespace.startswith("user:~") and "alice" not in expire.namespace
    untouched, _ = await stack.deps.store.list_audit(t, memory_id=lasting.id, limit=10, cursor=None)
    assert "expire" not in {e.operation for e in untouched}

    assert await ensure_retention_schedule(stack.client, stack.settings) is True
    assert await ensure_retention_schedule(stack.client, stack.settings) is False  # idempotent
    described = await stack.client.get_schedule_handle(RETENTION_SCHEDULE_ID).describe()
    assert described.schedule.spec.intervals[0].every == timedelta(seconds=stack.settings.retention_sweep_seconds)
    await stack.client.get_schedule_handle(RETENTION_SCHEDULE_ID).delete()


async def test_a_terminated_forget_workflow_reads_failed_and_a_repeat_restarts_it(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    t = tenant()
    alice = stack.auth(t, "alice")
    doomed = await seed(stack.deps, t, "alice", "alice's locker code is behind the poster")
    # Tombstone as the API does, but start no workflow; then start one and terminate it at once.
    selector = {"kind": "memory", "memory_id": doomed.id}
    row, _ = await ForgetStore(stack.deps.store).begin(
        tenant_id=t,
        requester="user:alice",
        selector=MemorySelector(memory_id=doomed.id),
        redacted_selector=selector,
        selector_key=selector_key(t, selector),
        reason="owner_request",
        subject_hash=None,
        now=doomed.created_at,
    )
    handle = await stack.client.start_workflow(
        "ForgetWorkflow",
        ForgetInput(deletion_id=row.id, tenant_id=t),
        id=row.workflow_id or "",
        task_queue="nobody-polls-this-queue",
    )
    await handle.terminate(reason="test")
    failed = (await http.get(f"/v1/deletions/{row.id}", headers=alice)).json()
    assert failed["status"] == "failed" and failed["receipt_hash"] is None
    again = await http.delete(f"/v1/memories/{doomed.id}", headers=alice)
    assert again.status_code == 202 and again.json()["deletion_id"] == row.id
    receipt = await wait_verified(http, row.id, alice)
    assert receipt["status"] == "verified" and receipt_hash(receipt["receipt"]) == receipt["receipt_hash"]


async def test_temporal_unreachable_still_tombstones_answers_503_and_a_repeat_finishes(
    stack: Stack, http: httpx.AsyncClient
) -> None:
    from temporalio.client import Client

    from api.app import create_app
    from api.state import ApiState
    from stack.devserver import free_port

    t = tenant()
    alice = stack.auth(t, "alice")
    doomed = await seed(stack.deps, t, "alice", "alice's spare key is under the mat")
    nowhere = await Client.connect(f"127.0.0.1:{free_port()}", lazy=True)  # nothing listens there
    app = create_app(stack.settings, temporal=nowhere, store=stack.deps.store)
    app.state.mw = ApiState(settings=stack.settings, store=stack.deps.store, temporal=nowhere)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as down:
        answer = await down.delete(f"/v1/memories/{doomed.id}", headers=alice)
    assert answer.status_code == 503 and answer.headers["content-type"].startswith("application/problem+json")
    body = answer.json()
    assert body["code"] == "forget_not_started" and body["status"] == 503 and body["deletion_id"]
    assert body["deletion_status"] == "tombstoned"
    record = await stack.deps.store.get_memory(t, doomed.id)
    assert record is not None and record.status is Status.TOMBSTONED  # the tombstone holds regardless

    again = await http.delete(f"/v1/memories/{doomed.id}", headers=alice)  # Temporal is back
    assert again.status_code == 202 and again.json()["deletion_id"] == body["deletion_id"]
    await wait_verified(http, body["deletion_id"], alice)
