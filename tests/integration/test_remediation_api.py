"""Remediation end to end (issue 25): revert, rollback of a poisoning agent, the moderation queue, blast radius.

The real stack: the Temporal dev server, the worker over SQLite and Qdrant Edge, the API under uvicorn,
all spoken to over HTTP (tests/integration/api_stack.py).
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from memwarden.forget import canonical, subject_key
from memwarden.records import RollbackInput, Status
from memwarden.remediation import MemoriesSelector, redacted_selector
from memwarden.stores.remediation import RemediationStore
from memwarden.stores.summaries import park_summary_request
from memwarden.temporal.client import connect
from tests.integration.api_stack import Api, assert_problem
from workflows.remediation import RollbackWorkflow
from workflows.summarize import SummarizeWorkflow

FACT = {"type": "fact", "source_kind": "user", "reason": "user_stated_fact"}
GOOD = "The team standup is at half past nine in the small room"
POISON = "The team standup moved to six in the morning on Saturdays"


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


async def propose(http: httpx.AsyncClient, headers: dict[str, str], content: str, **fields: Any) -> dict[str, Any]:
    answer = await http.post("/v1/memories", headers=headers, json=FACT | {"content": content} | fields)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


async def search(http: httpx.AsyncClient, headers: dict[str, str], query: str, **fields: Any) -> list[dict[str, Any]]:
    answer = await http.post("/v1/search", headers=headers, json={"query": query, "k": 10} | fields)
    assert answer.status_code == 200, answer.text
    return answer.json()["results"]  # type: ignore[no-any-return]


async def confirm(http: httpx.AsyncClient, headers: dict[str, str], memory_id: str) -> dict[str, Any]:
    answer = await http.post(f"/v1/memories/{memory_id}/confirm", headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


async def until_verified(http: httpx.AsyncClient, headers: dict[str, str], rollback_id: str) -> dict[str, Any]:
    for _ in range(240):
        view = (await http.get(f"/v1/rollbacks/{rollback_id}", headers=headers)).json()
        if view["status"] == "verified":
            return view  # type: ignore[no-any-return]
        await asyncio.sleep(0.25)
    raise AssertionError(f"rollback not verified: {view}")


def window() -> dict[str, str]:
    now = datetime.now(UTC)
    return {"since": (now - timedelta(hours=1)).isoformat(), "until": (now + timedelta(hours=1)).isoformat()}


async def test_a_poisoned_shared_store_is_rolled_back_and_the_reader_gets_the_prior_value(
    api: Api, http: httpx.AsyncClient
) -> None:
    t = tenant()
    alice = api.auth(t, "alice", stores=["team"])
    moderator = api.auth(t, "carol", stores=["team"], moderates=["team"])
    poisoner = api.auth(t, "svc-a", "agent", agent="scraper", on_behalf_of="alice", stores=["team"])
    reader = api.auth(t, "svc-b", "agent", agent="planner", on_behalf_of="dave", stores=["team"])
    operator = api.auth(t, "ops", "operator")
    shared = {"scope": "shared", "store": "team", "slot": "team.standup"}

    good = await propose(http, alice, GOOD, **shared)
    assert good["decision"] == "PENDING"
    await confirm(http, moderator, good["memory_id"])
    bad = await propose(http, poisoner, POISON, **shared)
    assert (bad["decision"], bad["supersedes"]) == ("PENDING", good["memory_id"])
    assert (await confirm(http, moderator, bad["memory_id"]))["supersedes"] == good["memory_id"]

    # The second agent is influenced: it retrieves the poisoned value in its session.
    hits = await search(http, reader, "when is the team standup", session="s-42")
    assert [h["memory_id"] for h in hits] == [bad["memory_id"]]

    accepted = await http.post(
        "/v1/rollbacks",
        headers=operator,
        json={"selector": {"kind": "writer", "writer": "agent:svc-a", **window()}, "reason": "poisoned_agent"},
    )
    assert accepted.status_code == 202, accepted.text
    rollback = accepted.json()
    assert rollback["counts"]["quarantined"] == 1
    # Excluded before the answer: the very next read does not return it, whatever the workflow's progress.
    assert bad["memory_id"] not in [h["memory_id"] for h in await search(http, reader, "when is the team standup")]
    stored = await api.store.get_memory(t, bad["memory_id"])
    assert stored is not None and stored.status is Status.QUARANTINED

    view = await until_verified(http, operator, rollback["rollback_id"])
    [member] = view["members"]
    assert (member["memory_id"], member["outcome"], member["status"]) == (bad["memory_id"], "restored", "quarantined")
    hits = await search(http, reader, "when is the team standup")
    assert [h["content"] for h in hits] == [GOOD]
    assert hits[0]["memory_id"] == member["restored_id"] != good["memory_id"]

    # The receipt: counts (the blast radius among them), per-sink evidence, hash-chained into the audit log.
    receipt = view["receipt"]
    assert hashlib.sha256(canonical(receipt).encode()).hexdigest() == view["receipt_hash"]
    assert receipt["counts"]["reads"]["searches"] == 1 and receipt["counts"]["reads"]["agents"] == 1
    assert {s["name"] for s in receipt["sinks"]} >= {"vector_index", "cache", "summaries"}
    assert all(s["status"] == "verified" for s in receipt["sinks"])
    event = await api.store.get_audit_event(view["audit_event_id"])
    assert event is not None and event.details["receipt_hash"] == view["receipt_hash"]
    verified = (await http.get("/v1/audit/verify", headers=operator)).json()
    assert verified["ok"] is True

    # Blast radius of the bad memory: which agents and sessions it reached, without content.
    reads = (await http.get(f"/v1/memories/{bad['memory_id']}/reads", headers=operator)).json()
    assert reads["searches"] == 1
    assert reads["agents"] == [{"agent_id": "planner", "searches": 1}]
    assert reads["sessions"] == [{"session": "s-42", "searches": 1}]
    assert POISON not in str(reads)

    # History is never rewritten: the restored version shows the quarantined write and the original.
    detail = (await http.get(f"/v1/memories/{member['restored_id']}", headers=alice)).json()
    assert [(h["id"], h["status"]) for h in detail["history"]] == [
        (bad["memory_id"], "quarantined"),
        (good["memory_id"], "superseded"),
    ]

    # The same request again is the same rollback.
    again = await http.post(
        "/v1/rollbacks",
        headers=operator,
        json={"selector": {"kind": "memories", "memory_ids": [bad["memory_id"]]}, "reason": "poisoned_agent"},
    )
    assert again.status_code == 404  # nothing left in use to quarantine, and this selector was never used

    # The moderator forgets what stays quarantined: a deletion with its own receipt.
    forgotten = await http.post(f"/v1/rollbacks/{rollback['rollback_id']}/forget", headers=moderator)
    assert forgotten.status_code == 202, forgotten.text
    for _ in range(240):
        deletion = (await http.get(f"/v1/deletions/{forgotten.json()['deletion_id']}", headers=operator)).json()
        if deletion.get("status") == "verified":
            break
        await asyncio.sleep(0.25)
    row = await api.store.get_memory(t, bad["memory_id"])
    assert row is not None and row.status is Status.PURGED and row.content is None
    assert [h["content"] for h in await search(http, reader, "when is the team standup")] == [GOOD]

    metrics = (await http.get("/metrics")).text
    for series in ("memwarden_rollbacks_total", "memwarden_memories_quarantined_total"):
        assert series in metrics
    influenced = re.search(
        r'memwarden_answers_unreviewed_total\{[^}]*reason="quarantined_later"[^}]*\} ([0-9.]+)', metrics
    )
    assert influenced is not None and float(influenced.group(1)) >= 1


async def test_a_rollback_repeated_is_one_rollback_and_a_released_write_comes_back(
    api: Api, http: httpx.AsyncClient
) -> None:
    t = tenant()
    alice = api.auth(t, "alice", stores=["ops"])
    moderator = api.auth(t, "carol", stores=["ops"], moderates=["ops"])
    agent = api.auth(t, "svc-a", "agent", agent="scraper", on_behalf_of="alice", stores=["ops"])
    shared = {"scope": "shared", "store": "ops", "slot": "ops.oncall"}
    first = await propose(http, alice, "The on-call rotation changes every Monday morning", **shared)
    await confirm(http, moderator, first["memory_id"])
    later = await propose(http, agent, "The on-call rotation changes every Thursday evening", **shared)
    await confirm(http, moderator, later["memory_id"])

    body = {"selector": {"kind": "memories", "memory_ids": [later["memory_id"]]}, "reason": "suspect", "store": "ops"}
    one = await http.post("/v1/rollbacks", headers=moderator, json=body)
    two = await http.post("/v1/rollbacks", headers=moderator, json=body)
    assert one.status_code == two.status_code == 202
    assert one.json()["rollback_id"] == two.json()["rollback_id"]
    view = await until_verified(http, moderator, one.json()["rollback_id"])
    restored = view["members"][0]["restored_id"]

    # The moderator releases it after all: its value is live again, as a new version over the restored one.
    released = await http.post(f"/v1/memories/{later['memory_id']}/release", headers=moderator)
    assert released.status_code == 200, released.text
    live = released.json()
    assert live["reverted"] == restored and live["outcome"] == "released"
    hits = await search(http, alice, "when does the on-call rotation change")
    assert [h["content"] for h in hits] == ["The on-call rotation changes every Thursday evening"]
    again = await http.post(f"/v1/memories/{later['memory_id']}/release", headers=moderator)
    assert again.status_code == 200 and again.json()["memory_id"] == live["memory_id"]


async def test_revert_brings_back_the_superseded_value_once(api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()
    alice = api.auth(t, "alice")
    pref = {"type": "preference", "reason": "user_explicit_preference", "slot": "drink.morning"}
    tea = await propose(http, alice, "Alice drinks green tea in the morning", **pref)
    coffee = await propose(http, alice, "Alice drinks black coffee in the morning", **pref)
    assert coffee["supersedes"] == tea["memory_id"]

    first = await http.post(f"/v1/memories/{coffee['memory_id']}/revert", headers=alice)
    assert first.status_code == 200, first.text
    second = await http.post(f"/v1/memories/{coffee['memory_id']}/revert", headers=alice)
    assert second.status_code == 200 and second.json()["memory_id"] == first.json()["memory_id"]
    reverted = first.json()
    assert (reverted["reverted"], reverted["restored_from"]) == (coffee["memory_id"], tea["memory_id"])

    live = [m for m in (await http.get("/v1/memories", headers=alice)).json()["items"] if m["slot"] == "drink.morning"]
    assert [(m["id"], m["content"]) for m in live] == [(reverted["memory_id"], "Alice drinks green tea in the morning")]
    detail = (await http.get(f"/v1/memories/{reverted['memory_id']}", headers=alice)).json()
    assert [(h["id"], h["status"]) for h in detail["history"]] == [
        (coffee["memory_id"], "superseded"),
        (tea["memory_id"], "superseded"),
    ]
    hits = await search(http, alice, "what does alice drink in the morning")
    assert hits[0]["memory_id"] == reverted["memory_id"]
    events, _ = await api.store.list_audit(t, operation="revert", limit=10, cursor=None)
    assert [e.memory_id for e in events] == [reverted["memory_id"]]

    assert_problem(await http.post(f"/v1/memories/{tea['memory_id']}/revert", headers=alice), 409, code="not_live")
    bob = api.auth(t, "bob")
    assert_problem(await http.post(f"/v1/memories/{reverted['memory_id']}/revert", headers=bob), 404)


async def test_the_moderation_queue_lists_and_settles_in_bulk_but_never_ones_own_write(
    api: Api, http: httpx.AsyncClient
) -> None:
    t = tenant()
    bob = api.auth(t, "bob", stores=["team"])
    carol = api.auth(t, "carol", stores=["team"], moderates=["team"])
    shared = {"scope": "shared", "store": "team"}
    one = await propose(http, bob, "The release train leaves every second Tuesday", **shared)
    two = await propose(http, bob, "Design reviews happen in the big room upstairs", **shared)
    own = await propose(http, carol, "The team offsite is planned for late spring", **shared)

    queue = (await http.get("/v1/stores/team/pending", headers=carol)).json()["items"]
    assert [i["memory_id"] for i in queue] == [one["memory_id"], two["memory_id"], own["memory_id"]]
    assert queue[0]["writer"] == "user:bob" and "staged_shared_store" in queue[0]["reason_codes"]
    assert queue[0]["content"] == "The release train leaves every second Tuesday" and queue[0]["age_seconds"] >= 0
    assert [i["own_write"] for i in queue] == [False, False, True]
    assert_problem(await http.get("/v1/stores/team/pending", headers=bob), 403, code="not_moderator")

    missing = str(uuid.uuid4())
    settled = await http.post(
        "/v1/stores/team/pending/settle",
        headers=carol,
        json={"action": "confirm", "memory_ids": [one["memory_id"], own["memory_id"], missing]},
    )
    assert settled.status_code == 200, settled.text
    results = {r["memory_id"]: r for r in settled.json()["results"]}
    assert results[one["memory_id"]]["decision"] == "ADD"
    assert (results[own["memory_id"]]["status"], results[own["memory_id"]]["code"]) == (403, "own_write")
    assert results[missing]["status"] == 404
    assert_problem(await http.post(f"/v1/memories/{own['memory_id']}/confirm", headers=carol), 403, code="own_write")
    declined = await http.post(
        "/v1/stores/team/pending/settle", headers=carol, json={"action": "decline", "memory_ids": [two["memory_id"]]}
    )
    assert declined.json()["results"][0]["decision"] == "REJECT"
    left = (await http.get("/v1/stores/team/pending", headers=carol)).json()["items"]
    assert [i["memory_id"] for i in left] == [own["memory_id"]]


async def test_bad_rollback_requests_are_problems_naming_the_field(api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()
    operator = api.auth(t, "ops", "operator")
    moderator = api.auth(t, "carol", stores=["team"], moderates=["team"])
    now = datetime.now(UTC)

    async def post(headers: dict[str, str], body: dict[str, Any]) -> httpx.Response:
        return await http.post("/v1/rollbacks", headers=headers, json=body)

    no_window = {"selector": {"kind": "writer", "writer": "agent:svc-a"}, "reason": "x"}
    assert_problem(await post(operator, no_window), 422, field="selector.writer.since")
    backwards = {
        "selector": {"kind": "writer", "writer": "agent:svc-a", "since": now.isoformat(), "until": now.isoformat()},
        "reason": "x",
    }
    assert_problem(await post(operator, backwards), 422, field="selector.writer")
    naive = {
        "selector": {"kind": "writer", "writer": "agent:svc-a", "since": "2026-01-01T00:00:00", **window()},
        "reason": "x",
    }
    naive["selector"]["since"] = "2026-01-01T00:00:00"
    assert_problem(await post(operator, naive), 422, field="selector.writer.since")
    assert_problem(await post(operator, {"selector": {"kind": "everything"}, "reason": "x"}), 422, field="selector")
    unknown = {"selector": {"kind": "memories", "memory_ids": [str(uuid.uuid4())]}, "reason": "x"}
    assert_problem(await post(operator, unknown), 404, field="selector.memory_ids.0", code="not_found")
    nothing = {"selector": {"kind": "writer", "writer": "agent:nobody", **window()}, "reason": "x"}
    assert_problem(await post(operator, nothing), 404, field="selector", code="nothing_matched")
    assert_problem(await post(moderator, nothing), 422, field="store")
    assert_problem(await post(moderator, nothing | {"store": "other"}), 403, field="store", code="not_moderator")
    assert_problem(await post(api.auth(t, "bob"), nothing), 403, code="forbidden_role")


async def test_a_rollback_rederives_the_summaries_that_drew_on_the_writes(api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()
    marker = f"marmot{uuid.uuid4().hex[:8]}"
    alice = api.auth(t, "alice")
    agent = api.auth(t, "svc-a", "agent", agent="scraper", on_behalf_of="alice")
    episode = {"type": "episodic", "reason": "user_stated_fact"}
    kept = await propose(http, alice, "alice walked the dog along the canal at dawn", **episode)
    bad = await propose(http, agent, f"alice visited the {marker} shop in the old town", **episode)
    assert kept["decision"] == bad["decision"] == "ADD"
    client = await connect(api.settings)
    request = await park_summary_request(
        api.store, subject_key(api.settings.auth_secret_value), tenant_id=t, owner_id="alice", actor="system:test"
    )
    first = await client.execute_workflow(
        SummarizeWorkflow.run, request, id=f"summarize-{uuid.uuid4()}", task_queue=api.settings.temporal_task_queue
    )
    old = await api.store.get_memory(t, first.summary_id or "")
    assert old is not None and marker in (old.content or "")

    operator = api.auth(t, "ops", "operator")
    accepted = await http.post(
        "/v1/rollbacks",
        headers=operator,
        json={"selector": {"kind": "writer", "writer": "agent:svc-a", **window()}, "reason": "poisoned_agent"},
    )
    view = await until_verified(http, operator, accepted.json()["rollback_id"])
    summaries = next(s for s in view["sinks"] if s["name"] == "summaries")
    assert summaries["applied"] == 1 and summaries["evidence"]["remaining"] == 0
    old = await api.store.get_memory(t, old.id)
    assert old is not None and old.status is Status.PURGED and old.content is None
    current = [m for m in (await http.get("/v1/memories", headers=alice)).json()["items"] if m["type"] == "summary"]
    assert len(current) == 1 and marker not in current[0]["content"] and "canal" in current[0]["content"]


async def test_the_python_client_speaks_remediation(api: Api, http: httpx.AsyncClient) -> None:
    from memwarden.client import MemwardenClient

    t = tenant()
    pref = {"type": "preference", "reason": "user_explicit_preference", "slot": "music"}
    async with (
        MemwardenClient(api.base_url, api.token(t, "alice", stores=["team"])) as alice,
        MemwardenClient(api.base_url, api.token(t, "carol", stores=["team"], moderates=["team"])) as carol,
        MemwardenClient(api.base_url, api.token(t, "ops", "operator")) as ops,
    ):
        jazz = await propose(http, api.auth(t, "alice"), "Alice likes jazz while working", **pref)
        rock = await propose(http, api.auth(t, "alice"), "Alice likes rock while working", **pref)
        reverted = await alice.revert(rock["memory_id"])
        assert reverted["restored_from"] == jazz["memory_id"]
        await alice.search("what music does alice like while working", session="s-9")
        reads = await ops.reads(reverted["memory_id"])
        assert reads["sessions"] == [{"session": "s-9", "searches": 1}]
        staged = await propose(
            http, api.auth(t, "alice", stores=["team"]), "Lunch is at noon", scope="shared", store="team"
        )
        queue = await carol.pending("team")
        assert [i["memory_id"] for i in queue["items"]] == [staged["memory_id"]]
        settled = await carol.settle_many("team", [staged["memory_id"]])
        assert settled["results"][0]["decision"] == "ADD"
        accepted = await ops.rollback({"kind": "memories", "memory_ids": [staged["memory_id"]]}, reason="suspect")
        for _ in range(240):
            receipt = await ops.rollback_receipt(accepted["rollback_id"])
            if receipt["status"] == "verified":
                break
            await asyncio.sleep(0.25)
        assert receipt["members"][0]["status"] == "quarantined"
        released = await carol.release(staged["memory_id"])
        assert released["outcome"] == "released"


async def test_a_rollback_whose_workflow_died_says_failed_and_repeating_it_finishes(
    api: Api, http: httpx.AsyncClient
) -> None:
    t = tenant()
    alice = api.auth(t, "alice")
    pref = {"type": "preference", "reason": "user_explicit_preference", "slot": "tea"}
    await propose(http, alice, "Alice drinks her tea without milk", **pref)
    bad = await propose(http, alice, "Alice drinks her tea with three sugars", **pref)
    selector = MemoriesSelector(memory_ids=[bad["memory_id"]])
    # The API's first step landed (the quarantine) and then the start failed: what `503 rollback_not_started` leaves.
    row, _ = await RemediationStore(api.store).quarantine(
        tenant_id=t,
        requester="operator:ops",
        selector=selector,
        redacted=redacted_selector(selector, subject_key(api.settings.auth_secret_value), t),
        reason="suspect",
        store=None,
        now=datetime.now(UTC),
    )
    operator = api.auth(t, "ops", "operator")
    assert (await http.get(f"/v1/rollbacks/{row.id}", headers=operator)).json()["status"] == "quarantined"
    client = await connect(api.settings)
    handle = await client.start_workflow(
        RollbackWorkflow.run,
        RollbackInput(rollback_id=row.id, tenant_id=t),
        id=row.workflow_id,
        task_queue=f"nobody-polls-{uuid.uuid4().hex[:6]}",
    )
    await handle.terminate(reason="test")
    assert (await http.get(f"/v1/rollbacks/{row.id}", headers=operator)).json()["status"] == "failed"

    again = await http.post(
        "/v1/rollbacks",
        headers=operator,
        json={"selector": {"kind": "memories", "memory_ids": [bad["memory_id"]]}, "reason": "suspect"},
    )
    assert again.status_code == 202 and again.json()["rollback_id"] == row.id
    view = await until_verified(http, operator, row.id)
    assert view["members"][0]["outcome"] == "restored"
    hits = await search(http, alice, "how does alice drink her tea")
    assert hits[0]["content"] == "Alice drinks her tea without milk"
