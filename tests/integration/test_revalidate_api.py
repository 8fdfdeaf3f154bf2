"""Revalidate end to end: a real HTTP system of record run by this test, the dev server, the worker, the API.

The source server (tests/source_server.py) serves values with versions, 304/200/404/410, delays,
hangs, outages and flapping; sources.toml in the stack's data dir points at it. Memories are placed
through the store and index (what a commit does), except in the issue's scenario, which goes through
`POST /v1/memories` as a person would. Every text is synthetic; every test has its own tenant and keys.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.api.enums.v1 import EventType, ParentClosePolicy
from temporalio.client import Client, WorkflowExecutionStatus

from api.routes.events import invalidate_workflow_id
from memwarden.config import Settings
from memwarden.identity import mint_token
from memwarden.records import (
    InvalidateResult,
    MemoryRecord,
    MemoryType,
    RevalidateInput,
    RevalidateResult,
    RevalidationOutcome,
    SourceKind,
    SourceRef,
    Status,
    content_hash,
)
from memwarden.services.deps import Deps
from memwarden.stores.vectors import index_point
from memwarden.temporal.names import revalidate_workflow_id
from tests.integration.api_stack import assert_problem
from tests.source_server import SourceServer, sources_toml
from tests.stack_support import embedded_stack
from workflows.revalidate import CHECK_RETRY

PROGRAMS_TIMEOUT_MS = 300


@dataclass
class Stack:
    settings: Settings
    deps: Deps
    http: httpx.AsyncClient
    temporal: Client
    src: SourceServer
    spans: InMemorySpanExporter

    def auth(self, tenant: str, sub: str, role: str = "user", **claims: Any) -> dict[str, str]:
        token = mint_token(self.settings.auth_secret_value, tenant=tenant, sub=sub, role=role, **claims)
        return {"Authorization": f"Bearer {token}"}

    def agent(self, tenant: str) -> dict[str, str]:
        return self.auth(tenant, "planner-svc", "agent", agent="planner", on_behalf_of="alice")

    async def put(
        self, tenant: str, content: str, key: str, *, system: str = "programs", **fields: Any
    ) -> MemoryRecord:
        """A committed source-backed fact: the row, then its index point."""
        now = datetime.now(UTC)
        record = MemoryRecord(
            id=str(uuid.uuid4()),
            tenant_id=tenant,
            owner_id=fields.pop("owner_id", "alice"),
            type=fields.pop("type", MemoryType.FACT),
            slot=fields.pop("slot", None),
            content=content,
            content_hash=content_hash(content),
            source_kind=fields.pop("source_kind", SourceKind.USER),
            source_ref=SourceRef(system=system, key=key, version=fields.pop("version", "v1")),
            reason="user_stated_fact",
            created_at=fields.pop("created_at", now),
            updated_at=now,
            last_confirmed_at=fields.pop("last_confirmed_at", now),
            **fields,
        )
        await self.deps.store.insert_memory(record)
        [dense] = await asyncio.to_thread(self.deps.embedder.embed, [content])
        await self.deps.index.upsert([index_point(record, dense)])
        return record

    async def search(self, headers: dict[str, str], **body: Any) -> dict[str, Any]:
        answer = await self.http.post("/v1/search", headers=headers, json=body)
        assert answer.status_code == 200, answer.text
        return answer.json()  # type: ignore[no-any-return]

    async def event(
        self,
        tenant: str,
        key: str,
        *,
        kind: str = "changed",
        source: str = "programs",
        sub: str | None = None,
        version: str | None = None,
    ) -> httpx.Response:
        body = {
            "specversion": "1.0",
            "id": str(uuid.uuid4()),
            "source": source,
            "type": f"memwarden.source.{kind}",
            "subject": key,
            "data": {"version": version} if version else None,
        }
        headers = self.auth(tenant, sub or source, "system") | {"Content-Type": "application/cloudevents+json"}
        return await self.http.post("/v1/events", headers=headers, content=json.dumps(body))

    async def audit(self, tenant: str, memory_id: str) -> list[dict[str, Any]]:
        ops = self.auth(tenant, "ops-1", "operator")
        answer = await self.http.get("/v1/audit", headers=ops, params={"memory_id": memory_id, "limit": 200})
        assert answer.status_code == 200, answer.text
        return answer.json()["items"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def src() -> Iterator[SourceServer]:
    with SourceServer() as server:
        yield server


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory, src: SourceServer) -> AsyncIterator[Stack]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    data_dir = Path(tmp_path_factory.mktemp("revalidate-api"))
    (data_dir / "sources.toml").write_text(
        # programs: every read checks it (a freshness window of 0), as a volatile booking system would be.
        # Its URL names the tenant and owner, so an agent may cite its records for the user it serves.
        sources_toml("programs", src.scoped_url, timeout_ms=PROGRAMS_TIMEOUT_MS, freshness_seconds=0)
        # hr: a source that is not the designated system of record for what people tell us.
        + sources_toml("hr", src.url, timeout_ms=PROGRAMS_TIMEOUT_MS, system_of_record=False, principals=["svc-hr"])
    )
    exporter = InMemorySpanExporter()
    async with (
        embedded_stack(
            data_dir,
            span_exporter=exporter,
            dev_dir=data_dir / "temporal",
            invalidate_coalesce_seconds=1.5,
            invalidate_quiet_seconds=1.0,
            revalidation_background_attempts=8,
            retention_classes={"standard": {}, "legal-hold": {"hold": True}},  # one audit path among the others
        ) as s,
        httpx.AsyncClient(base_url=s.base_url, timeout=30) as http,
    ):
        yield Stack(s.settings, s.deps, http, s.client, src, exporter)


@pytest.fixture(autouse=True)
def _source_up(src: SourceServer) -> Iterator[None]:
    src.set(delay=0.0, mode="up")
    yield
    src.set(delay=0.0, mode="up")


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def key() -> str:
    return f"rec-{uuid.uuid4().hex[:8]}"


def everything(out: dict[str, Any]) -> str:
    return json.dumps(out)


async def eventually(check: Any, *, within: float = 20.0, every: float = 0.2) -> Any:
    deadline = time.monotonic() + within
    while True:
        value = await check()
        if value:
            return value
        assert time.monotonic() < deadline, "condition not reached in time"
        await asyncio.sleep(every)


async def live_for(stack: Stack, tenant_id: str, system: str, k: str) -> list[MemoryRecord]:
    from memwarden.stores.revalidation import RevalidationStore

    return await RevalidationStore(stack.deps.store).dependents(tenant_id, system, k)


# -- the issue's scenario (part 8), as one test ------------------------------------------------


async def test_scenario_a_moved_date_is_never_served_again_and_a_hanging_source_withholds_or_labels(
    stack: Stack,
) -> None:
    t, k = tenant(), key()
    agent = stack.agent(t)
    old_date, new_date = "2027-03-01", "2027-04-15"
    stack.src.put(k, f"synthetic: the pottery program starts on {old_date}", "v1")

    # 1. A user-stated date with a source_ref, written through the gate.
    created = await stack.http.post(
        "/v1/memories",
        headers=agent,
        json={
            "content": f"synthetic: the pottery program starts on {old_date}",
            "type": "fact",
            "source_kind": "user",
            "reason": "user_stated_fact",
            "source_ref": {"system": "programs", "key": k, "version": "v1"},
        },
    )
    assert created.status_code == 200, created.text
    assert created.json()["decision"] == "ADD", created.json()
    first_id = created.json()["memory_id"]

    # 2. Served as verified: checked at the source (304 for v1) before the answer.
    out = await stack.search(agent, query="when does the pottery program start", consequence="high")
    [hit] = [r for r in out["results"] if r["memory_id"] == first_id]
    assert hit["freshness"] == "verified" and old_date in hit["content"]
    assert "freshness=verified" in hit["label"] and "source=user:programs" in hit["label"]
    assert stack.src.state.conditional[-1] == '"v1"'

    # 3. The source moves it and emits an event: from the 202 on, the old date is never served again.
    stack.src.put(k, f"synthetic: the pottery program starts on {new_date}", "v2")
    accepted = await stack.event(t, k, version="v2")
    assert accepted.status_code == 202, accepted.text
    assert accepted.json()["stale"] == 1
    assert (await stack.deps.store.get_memory(t, first_id)).status is Status.STALE  # type: ignore[union-attr]

    async def new_value_served() -> str | None:
        for consequence in ("low", "high"):
            got = await stack.search(agent, query="when does the pottery program start", consequence=consequence)
            assert old_date not in everything(got), "the old date was served after the source moved it"
        dependents = await live_for(stack, t, "programs", k)
        if len(dependents) == 1 and dependents[0].id != first_id and dependents[0].status is Status.ACTIVE:
            return dependents[0].id
        return None

    new_id = await eventually(new_value_served)
    old = await stack.deps.store.get_memory(t, first_id)
    new = await stack.deps.store.get_memory(t, new_id)
    assert old is not None and new is not None
    assert old.status is Status.SUPERSEDED and old.superseded_by == new_id
    assert new.supersedes == first_id and new.source_ref is not None and new.source_ref.version == "v2"
    assert new_date in (new.content or "")

    # 4. The source hangs: a high-consequence read answers within the timeout and withholds ...
    stack.src.set(delay=5.0)
    started = time.monotonic()
    high = await stack.search(agent, query="when does the pottery program start", consequence="high")
    elapsed = time.monotonic() - started
    assert elapsed < 2.5, f"high-consequence read took {elapsed:.2f} s with the source hanging 5 s"
    assert {"memory_id": new_id, "reason": "source_unavailable"} in high["withheld"]
    assert all(r["memory_id"] != new_id for r in high["results"])
    assert old_date not in everything(high) and new_date not in everything(high)

    # ... and a low-consequence one labels it unverified, with its source and when it was last confirmed.
    started = time.monotonic()
    low = await stack.search(agent, query="when does the pottery program start", consequence="low")
    assert time.monotonic() - started < 2.5
    [labelled] = [r for r in low["results"] if r["memory_id"] == new_id]
    assert labelled["freshness"] == "unverified"
    assert labelled["source_ref"]["system"] == "programs" and labelled["last_confirmed_at"] is not None
    assert "freshness=unverified" in labelled["label"] and "source=system:programs" in labelled["label"]
    assert old_date not in everything(low)


# -- read-time outcomes -------------------------------------------------------------------------


async def test_a_value_changed_at_read_is_replaced_by_the_source_value_never_both(stack: Stack) -> None:
    t, k = tenant(), key()
    agent = stack.agent(t)
    held = await stack.put(t, "synthetic: the ceramics course room is B12", k, slot="course.room")
    stack.src.put(k, "synthetic: the ceramics course room is C7", "v2")
    out = await stack.search(agent, query="ceramics course room", consequence="high")
    [hit] = [r for r in out["results"] if "ceramics" in r["content"]]
    assert hit["memory_id"] != held.id and "C7" in hit["content"] and hit["freshness"] == "verified"
    assert hit["source_kind"] == "system" and hit["source_ref"]["version"] == "v2"
    old = await stack.deps.store.get_memory(t, held.id)
    assert old is not None and old.status is Status.SUPERSEDED and old.superseded_by == hit["memory_id"]
    live = await live_for(stack, t, "programs", k)
    assert [r.id for r in live] == [hit["memory_id"]]
    holder = await stack.deps.store.live_slot_holder(t, "alice", "user", None, None, "course.room")
    assert holder is not None and holder.id == hit["memory_id"]  # the slot's one live value moved
    [event] = [e for e in await stack.audit(t, held.id) if e["operation"] == "revalidate"]
    assert event["reason"] == "changed" and event["details"]["new_memory_id"] == hit["memory_id"]
    # Content hashes in the log are keyed under the owner's key (memwarden.stores.content_keys).
    keyed = stack.deps.store.content_keys.keyed
    assert event["hash_before"] == await keyed(t, "alice", held.content_hash)
    assert event["hash_after"] == await keyed(t, "alice", content_hash(hit["content"]))
    assert "C7" not in json.dumps(event) and "B12" not in json.dumps(event) and k not in json.dumps(event)


@pytest.mark.parametrize("status", [404, 410])
async def test_gone_at_the_source_invalidates_and_withholds(stack: Stack, status: int) -> None:
    t, k = tenant(), key()
    held = await stack.put(t, "synthetic: the glazing workshop is on tuesdays", k)
    stack.src.delete(k, status)
    out = await stack.search(stack.agent(t), query="glazing workshop day", consequence="low")
    assert {"memory_id": held.id, "reason": "source_gone"} in out["withheld"]
    assert "tuesdays" not in everything(out["results"]) and "tuesdays" not in out["context"]
    after = await stack.deps.store.get_memory(t, held.id)
    assert after is not None and after.status is Status.INVALIDATED
    assert [e["reason"] for e in await stack.audit(t, held.id) if e["operation"] == "revalidate"] == ["gone"]
    again = await stack.search(stack.agent(t), query="glazing workshop day", consequence="low")
    assert all(r["memory_id"] != held.id for r in again["results"])


async def test_unchanged_confirms_and_records_the_version(stack: Stack) -> None:
    t, k = tenant(), key()
    earlier = datetime.now(UTC) - timedelta(days=3)
    held = await stack.put(t, "synthetic: the kiln opens at eight", k, last_confirmed_at=earlier)
    stack.src.put(k, "synthetic: the kiln opens at eight", "v1")
    out = await stack.search(stack.agent(t), query="when does the kiln open", consequence="low")
    [hit] = [r for r in out["results"] if r["memory_id"] == held.id]
    assert hit["freshness"] == "verified"

    # Written before the search activity completed: on record by the time the answer arrives.
    after = await stack.deps.store.get_memory(t, held.id)
    assert after is not None and after.last_confirmed_at is not None and after.last_confirmed_at > earlier
    assert after.status is Status.ACTIVE and after.content == held.content
    # the same content under a new version: still unchanged, and the new version is recorded
    stack.src.put(k, "synthetic: the kiln opens at eight", "v5")
    await stack.search(stack.agent(t), query="when does the kiln open", consequence="high")

    async def versioned() -> list[str] | None:
        found = await stack.deps.store.get_memory(t, held.id)
        if found is None or found.source_ref is None or found.source_ref.version != "v5":
            return None
        return [e["details"]["answer"] for e in await stack.audit(t, held.id) if e["operation"] == "revalidate"]

    assert sorted(await versioned() or []) == ["not_modified", "same_content"]


async def test_unavailable_changes_nothing_and_a_child_outlives_the_read_to_finish_the_job(stack: Stack) -> None:
    t, k = tenant(), key()
    held = await stack.put(t, "synthetic: the studio closes at nine", k)
    stack.src.put(k, "synthetic: the studio closes at ten", "v2")
    stack.src.set(mode="down")
    out = await stack.search(stack.agent(t), query="when does the studio close", consequence="low")
    [hit] = [r for r in out["results"] if r["memory_id"] == held.id]
    assert hit["freshness"] == "unverified"
    unchanged = await stack.deps.store.get_memory(t, held.id)
    assert unchanged is not None and unchanged.version == held.version and unchanged.status is Status.ACTIVE

    async def recorded() -> list[dict[str, Any]]:
        return [e for e in await stack.audit(t, held.id) if e["operation"] == "revalidate"]

    attempts = await eventually(recorded)
    assert attempts[-1]["reason"] == "unavailable" and attempts[-1]["details"]["answer"] == "http_503"

    # The read has answered; its RevalidateWorkflow child was started abandoned and keeps trying.
    parent = stack.temporal.get_workflow_handle(out["workflow_id"])
    history = await parent.fetch_history()
    [started] = [
        e for e in history.events if e.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED
    ]
    attrs = started.start_child_workflow_execution_initiated_event_attributes
    assert attrs.parent_close_policy == ParentClosePolicy.PARENT_CLOSE_POLICY_ABANDON
    assert attrs.workflow_id == revalidate_workflow_id(held.id)
    assert (await parent.describe()).status is WorkflowExecutionStatus.COMPLETED
    child = stack.temporal.get_workflow_handle(revalidate_workflow_id(held.id), result_type=RevalidateResult)
    assert (await child.describe()).status is WorkflowExecutionStatus.RUNNING

    stack.src.set(mode="up")  # the source comes back: the background check supersedes the value
    # Its next attempt may be a whole backoff away (CHECK_RETRY: 1, 2, 4, 8, 16, then 30 s) on a slow box.
    longest = CHECK_RETRY.maximum_interval
    assert longest is not None
    result = await asyncio.wait_for(child.result(), longest.total_seconds() + 45)
    assert result.outcome is RevalidationOutcome.CHANGED and result.attempts >= 2
    after = await stack.deps.store.get_memory(t, held.id)
    assert after is not None and after.status is Status.SUPERSEDED
    [live] = await live_for(stack, t, "programs", k)
    assert "ten" in (live.content or "")


async def test_a_flapping_source_is_retried_until_it_answers(stack: Stack) -> None:
    t, k = tenant(), key()
    held = await stack.put(t, "synthetic: the wheel room seats six", k, last_confirmed_at=datetime.now(UTC))
    stack.src.put(k, "synthetic: the wheel room seats six", "v1")
    stack.src.set(mode="flap")  # the first answer is a 503, the next a 304, and so on
    out = await stack.search(stack.agent(t), query="how many seats in the wheel room", consequence="high")
    assert {"memory_id": held.id, "reason": "source_unavailable"} in out["withheld"]
    child = stack.temporal.get_workflow_handle(revalidate_workflow_id(held.id), result_type=RevalidateResult)
    result = await asyncio.wait_for(child.result(), 30)
    assert result.outcome is RevalidationOutcome.UNCHANGED
    again = await stack.search(stack.agent(t), query="how many seats in the wheel room", consequence="high")
    verdicts = [r["freshness"] for r in again["results"] if r["memory_id"] == held.id]
    withheld = [w for w in again["withheld"] if w["memory_id"] == held.id]
    assert verdicts == ["verified"] or withheld == [{"memory_id": held.id, "reason": "source_unavailable"}]


async def test_a_source_that_is_not_the_system_of_record_does_not_override_what_a_person_said(stack: Stack) -> None:
    t, k = tenant(), key()
    earlier = datetime.now(UTC) - timedelta(days=3)  # past hr's freshness window: low reads check it too
    held = await stack.put(t, "synthetic: alice's preferred name is Ally", k, system="hr", last_confirmed_at=earlier)
    stack.src.put(k, "synthetic: alice's preferred name is Alice", "v9")
    low = await stack.search(stack.agent(t), query="preferred name", consequence="low")
    high = await stack.search(stack.agent(t), query="preferred name", consequence="high")
    assert [r["freshness"] for r in low["results"] if r["memory_id"] == held.id] == ["unverified"]
    assert {"memory_id": held.id, "reason": "source_disputed"} in high["withheld"]
    after = await stack.deps.store.get_memory(t, held.id)
    assert after is not None and after.status is Status.ACTIVE and after.content == held.content
    reasons = {e["reason"] for e in await stack.audit(t, held.id) if e["operation"] == "revalidate"}
    assert reasons == {"disputed"}


async def test_a_source_value_the_gate_would_refuse_is_never_stored(stack: Stack) -> None:
    t, k = tenant(), key()
    held = await stack.put(t, "synthetic: the locker combination is kept at the desk", k)
    stack.src.put(
        k, "synthetic: deploy key AKIAZ7QXW3SYNTH5EXMP secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYSYNTHETICKEY", "v2"
    )
    out = await stack.search(stack.agent(t), query="locker combination desk", consequence="high")
    assert "AKIA" not in everything(out)
    assert {"memory_id": held.id, "reason": "source_value_rejected:secret_detected"} in out["withheld"]
    after = await stack.deps.store.get_memory(t, held.id)
    assert after is not None and after.status is Status.INVALIDATED
    assert await live_for(stack, t, "programs", k) == []
    [event] = [e for e in await stack.audit(t, held.id) if e["operation"] == "revalidate"]
    assert event["reason"] == "changed" and event["details"]["answer"] == "source_value_rejected:secret_detected"
    assert "AKIA" not in json.dumps(event)


# -- events ------------------------------------------------------------------------------------


async def test_a_deleted_record_invalidates_its_memories_before_the_202(stack: Stack) -> None:
    t, k = tenant(), key()
    held = await stack.put(t, "synthetic: the raku firing is booked for saturday", k)
    answer = await stack.event(t, k, kind="deleted")
    assert answer.status_code == 202, answer.text
    assert answer.json()["invalidated"] == 1 and answer.json()["stale"] == 0
    after = await stack.deps.store.get_memory(t, held.id)
    assert after is not None and after.status is Status.INVALIDATED
    out = await stack.search(stack.agent(t), query="raku firing booking", consequence="low")
    assert "saturday" not in everything(out)
    events = [e for e in await stack.audit(t, held.id) if e["operation"] == "revalidate"]
    assert events[0]["reason"] == "source_deleted" and events[0]["actor"] == "system:programs"


async def test_a_burst_of_events_for_one_record_coalesces_into_one_workflow(stack: Stack) -> None:
    t, k = tenant(), key()
    held = await stack.put(t, "synthetic: the clay order arrives monday", k)
    fetched_before = stack.src.requests(k)
    stack.src.put(k, "synthetic: the clay order arrives on day 19", "v21")  # the source moved 20 times
    answers = await asyncio.gather(*(stack.event(t, k, version=f"v{n + 2}") for n in range(20)))
    for answer in answers:
        assert answer.status_code == 202, answer.text
        assert answer.json()["workflow_id"] == invalidate_workflow_id(t, "programs", k)
    handle = stack.temporal.get_workflow_handle(invalidate_workflow_id(t, "programs", k), result_type=InvalidateResult)
    result = await asyncio.wait_for(handle.result(), 30)
    assert result.events == 20 and result.stale >= 1
    runs = [w async for w in stack.temporal.list_workflows(f"WorkflowId = '{handle.id}'")]
    assert len(runs) == 1, [r.run_id for r in runs]
    assert stack.src.requests(k) - fetched_before <= 3  # one check per coalesced pass, not one per event
    [live] = await live_for(stack, t, "programs", k)
    assert live.content == "synthetic: the clay order arrives on day 19" and live.id != held.id


BAD_EVENTS = [
    ({"id": None}, "id"),
    ({"id": ""}, "id"),
    ({"specversion": "0.3"}, "specversion"),
    ({"specversion": None}, "specversion"),
    ({"source": None}, "source"),
    ({"type": "com.example.other"}, "type"),
    ({"type": None}, "type"),
    ({"subject": None}, "subject"),
    ({"subject": ""}, "subject"),
    ({"data": {"version": 7}}, "data.version"),
    ({"data": "a string"}, "data"),
    ({"time": "not a time"}, "time"),
]


@pytest.mark.parametrize(("change", "field"), BAD_EVENTS)
async def test_a_malformed_event_is_422_naming_the_field_and_changes_nothing(
    stack: Stack, change: dict[str, Any], field: str
) -> None:
    t, k = tenant(), key()
    held = await stack.put(t, "synthetic: the tile class meets in hall four", k)
    body = {
        "specversion": "1.0",
        "id": str(uuid.uuid4()),
        "source": "programs",
        "type": "memwarden.source.changed",
        "subject": k,
        "data": {"version": "v2"},
    } | change
    body = {name: value for name, value in body.items() if value is not None}
    headers = stack.auth(t, "programs", "system") | {"Content-Type": "application/cloudevents+json"}
    answer = await stack.http.post("/v1/events", headers=headers, content=json.dumps(body))
    assert_problem(answer, 422, field=field)
    after = await stack.deps.store.get_memory(t, held.id)
    assert after is not None and after.status is Status.ACTIVE and after.version == held.version
    assert await stack.audit(t, held.id) == []


async def test_not_json_is_422_naming_the_body(stack: Stack) -> None:
    headers = stack.auth(tenant(), "programs", "system") | {"Content-Type": "application/cloudevents+json"}
    assert_problem(await stack.http.post("/v1/events", headers=headers, content=b"{nope"), 422, field="body")
    assert_problem(await stack.http.post("/v1/events", headers=headers, content=b"[1]"), 422, field="body")


async def test_binary_mode_events_are_accepted_too(stack: Stack) -> None:
    t, k = tenant(), key()
    held = await stack.put(t, "synthetic: the slab roller is in room two", k)
    headers = stack.auth(t, "programs", "system") | {
        "ce-specversion": "1.0",
        "ce-id": str(uuid.uuid4()),
        "ce-source": "programs",
        "ce-type": "memwarden.source.deleted",
        "ce-subject": k,
        "Content-Type": "application/json",
    }
    answer = await stack.http.post("/v1/events", headers=headers, content=b"{}")
    assert answer.status_code == 202, answer.text
    assert (await stack.deps.store.get_memory(t, held.id)).status is Status.INVALIDATED  # type: ignore[union-attr]


async def test_only_a_system_principal_for_its_own_source(stack: Stack) -> None:
    t, k = tenant(), key()
    held = await stack.put(t, "synthetic: the pottery fair is in june", k)
    body = json.dumps(
        {"specversion": "1.0", "id": "e-1", "source": "programs", "type": "memwarden.source.deleted", "subject": k}
    )
    ce = {"Content-Type": "application/cloudevents+json"}
    for role, sub, claims in (("user", "alice", {}), ("operator", "ops", {}), ("agent", "svc", {"agent": "planner"})):
        answer = await stack.http.post("/v1/events", headers=stack.auth(t, sub, role, **claims) | ce, content=body)
        assert_problem(answer, 403, code="forbidden_role")
    for sub in ("hr", "svc-hr", "somebody"):  # hr's principal may not speak for programs
        answer = await stack.http.post("/v1/events", headers=stack.auth(t, sub, "system") | ce, content=body)
        assert_problem(answer, 403, code="forbidden_source")
    unknown = body.replace('"programs"', '"nowhere"')
    answer = await stack.http.post("/v1/events", headers=stack.auth(t, "nowhere", "system") | ce, content=unknown)
    assert_problem(answer, 403, code="forbidden_source")
    assert (await stack.deps.store.get_memory(t, held.id)).status is Status.ACTIVE  # type: ignore[union-attr]
    # hr's own principal, for hr: accepted (sources.toml maps svc-hr to hr)
    answer = await stack.event(t, key(), kind="deleted", source="hr", sub="svc-hr")
    assert answer.status_code == 202, answer.text
    other_tenant = await stack.event(tenant(), k, kind="deleted")  # another tenant's event touches nothing here
    assert other_tenant.status_code == 202 and other_tenant.json()["invalidated"] == 0
    assert (await stack.deps.store.get_memory(t, held.id)).status is Status.ACTIVE  # type: ignore[union-attr]


# -- telemetry -------------------------------------------------------------------------------


async def metric(http: httpx.AsyncClient, name: str, **labels: str) -> float:
    total = 0.0
    for line in (await http.get("/metrics")).text.splitlines():
        if (line.startswith(name + "{") or line.startswith(name + " ")) and all(
            f'{k}="{v}"' in line for k, v in labels.items()
        ):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_revalidate_memory_spans_and_outcome_metrics_carry_no_content(stack: Stack) -> None:
    t, k = tenant(), key()
    before = await metric(stack.http, "memwarden_revalidations_total", outcome="changed")
    held = await stack.put(t, "synthetic: the bisque kiln holds forty pieces", k)
    stack.src.put(k, "synthetic: the bisque kiln holds sixty pieces", "v2")
    stack.spans.clear()
    out = await stack.search(stack.agent(t), query="bisque kiln capacity", consequence="high")
    new_id = next(r["memory_id"] for r in out["results"] if "sixty" in r["content"])
    spans = [s for s in stack.spans.get_finished_spans() if s.name == "revalidate_memory"]
    [span] = [s for s in spans if (s.attributes or {}).get("gen_ai.memory.record.id") == held.id]
    attrs = dict(span.attributes or {})
    assert attrs["gen_ai.operation.name"] == "revalidate_memory" and attrs["gen_ai.provider.name"] == "memwarden"
    assert attrs["memwarden.outcome"] == "changed" and attrs["memwarden.reason"] == "new_value"
    assert attrs["memwarden.new_memory.id"] == new_id and attrs["memwarden.tenant"] == t
    assert attrs["memwarden.revalidation.trigger"] == "read_time" and attrs["memwarden.source.system"] == "programs"
    text = json.dumps({k2: str(v) for k2, v in attrs.items()})
    assert "forty" not in text and "sixty" not in text and k not in text
    search_spans = [s for s in stack.spans.get_finished_spans() if s.name == "search_memory"]
    assert span.context.trace_id in {s.context.trace_id for s in search_spans}  # part of the read's trace
    assert await metric(stack.http, "memwarden_revalidations_total", outcome="changed") == before + 1
    assert await metric(stack.http, "memwarden_search_hits_total", freshness="verified") >= 1
    # the events route is a revalidate_memory span too
    stack.spans.clear()
    assert (await stack.event(t, k, kind="deleted")).status_code == 202
    [route] = [s for s in stack.spans.get_finished_spans() if s.name == "revalidate_memory"]
    assert route.attributes["memwarden.workflow.id"] == invalidate_workflow_id(t, "programs", k)  # type: ignore[index]


async def test_an_unchanged_read_time_check_is_a_span_too(stack: Stack) -> None:
    t, k = tenant(), key()
    held = await stack.put(t, "synthetic: the throwing class has eight wheels", k)
    stack.src.put(k, "synthetic: the throwing class has eight wheels", "v1")
    stack.spans.clear()
    await stack.search(stack.agent(t), query="throwing class wheels", consequence="high")
    [span] = [
        s
        for s in stack.spans.get_finished_spans()
        if s.name == "revalidate_memory" and (s.attributes or {}).get("gen_ai.memory.record.id") == held.id
    ]
    assert span.attributes["memwarden.outcome"] == "unchanged"  # type: ignore[index]
    assert span.attributes["memwarden.reason"] == "not_modified"  # type: ignore[index]


async def test_a_source_that_stays_down_changes_nothing_and_every_attempt_is_recorded(stack: Stack) -> None:
    t, k = tenant(), key()
    held = await stack.put(t, "synthetic: the glaze lab is open on weekends", k)
    stack.src.set(mode="down")
    result = await stack.temporal.execute_workflow(
        "RevalidateWorkflow",
        RevalidateInput(tenant_id=t, memory_id=held.id, trigger="test", max_attempts=3, retry_seconds=0.1),
        id=f"revalidate-test-{uuid.uuid4()}",
        task_queue=stack.settings.temporal_task_queue,
        result_type=RevalidateResult,
    )
    assert result.outcome is RevalidationOutcome.UNAVAILABLE and result.attempts == 3
    after = await stack.deps.store.get_memory(t, held.id)
    assert after is not None and after.version == held.version and after.last_confirmed_at == held.last_confirmed_at
    attempts = [e for e in await stack.audit(t, held.id) if e["operation"] == "revalidate"]
    assert sorted(e["details"]["attempt"] for e in attempts) == [1, 2, 3]
    assert {e["reason"] for e in attempts} == {"unavailable"}


async def test_the_python_client_posts_events(stack: Stack) -> None:
    from memwarden.client import MemwardenClient

    t, k = tenant(), key()
    held = await stack.put(t, "synthetic: the mould shop closes in august", k)
    token = stack.auth(t, "programs", "system")["Authorization"].split(" ", 1)[1]
    async with MemwardenClient(str(stack.http.base_url), token) as mw:
        answer = await mw.source_event("programs", k, deleted=True, event_id="evt-client-1")
    assert answer["event_id"] == "evt-client-1" and answer["invalidated"] == 1
    assert (await stack.deps.store.get_memory(t, held.id)).status is Status.INVALIDATED  # type: ignore[union-attr]


async def test_an_answer_from_before_a_change_event_never_undoes_it(stack: Stack) -> None:
    """The race between a source's answer and its confirmation: the source said 304, then an event marked
    the memory stale, then the confirmation is written. It must not make the memory active again."""
    from memwarden.records import SourceChange
    from memwarden.stores.audit import AuditEventIn
    from memwarden.stores.revalidation import RevalidationStore

    t, k = tenant(), key()
    held = await stack.put(t, "synthetic: the firing schedule is posted on fridays", k)
    store = RevalidationStore(stack.deps.store)

    def audit(r: MemoryRecord) -> AuditEventIn:
        return AuditEventIn(tenant_id=t, actor="test", operation="revalidate", memory_id=r.id, reason="test")

    now = datetime.now(UTC)
    assert await store.mark_for_event(t, "programs", k, SourceChange.CHANGED, now, audit) == [held.id]
    assert await store.confirm([(held, "v1")], now, audit) == {}  # asked about the version before the event
    assert await store.invalidate(held, now, audit) is None
    after = await stack.deps.store.get_memory(t, held.id)
    assert after is not None and after.status is Status.STALE and after.version == held.version + 1
    confirmed = await store.confirm([(after, "v1")], now, audit)  # asked after the event: applies
    assert confirmed[held.id].status is Status.ACTIVE


# -- one namespace, one label, whichever path records the event ----------------------------------


async def test_every_audit_event_about_one_namespace_carries_its_one_label(stack: Stack) -> None:
    """Remember, settle, correct, revalidate (at read, by event, in the background), retention, summarize,
    settings, export and forget each record events about alice's namespace; all of them name it alike."""
    from memwarden.forget import subject_key
    from memwarden.records import Namespace, Scope, namespace_label
    from memwarden.stores.audit import Pseudonymizer
    from memwarden.stores.summaries import park_summary_request
    from workflows.summarize import SummarizeWorkflow

    t, k = tenant(), key()
    agent, alice, ops = stack.agent(t), stack.auth(t, "alice"), stack.auth(t, "ops-1", "operator")

    async def remember(headers: dict[str, str], content: str, **fields: Any) -> dict[str, Any]:
        body = {"content": content, "type": "fact", "source_kind": "user", "reason": "user_stated_fact"} | fields
        answer = await stack.http.post("/v1/memories", headers=headers, json=body)
        assert answer.status_code == 200, answer.text
        return answer.json()  # type: ignore[no-any-return]

    # Remember a source-backed fact; a read checks it at its source (read-time revalidation).
    stack.src.put(k, "synthetic: the wheel class meets on mondays", "v1")
    sourced = await remember(
        agent,
        "synthetic: the wheel class meets on mondays",
        source_ref={"system": "programs", "key": k, "version": "v1"},
    )
    assert sourced["decision"] == "ADD", sourced
    out = await stack.search(agent, query="when does the wheel class meet", consequence="high")
    assert any(r["memory_id"] == sourced["memory_id"] and r["freshness"] == "verified" for r in out["results"])

    async def confirmed_at_read() -> bool:
        trail = await stack.audit(t, sourced["memory_id"])
        return any(e["operation"] == "revalidate" and e["details"]["trigger"] == "read_time" for e in trail)

    await eventually(confirmed_at_read)
    # The source moves it: the event marks it stale, the background check replaces it.
    stack.src.put(k, "synthetic: the wheel class meets on thursdays", "v2")
    assert (await stack.event(t, k, version="v2")).status_code == 202

    async def replaced() -> bool:
        dependents = await live_for(stack, t, "programs", k)
        return len(dependents) == 1 and dependents[0].id != sourced["memory_id"]

    await eventually(replaced)
    # Settle: a staged behaviour change, confirmed by its owner.
    staged = await remember(
        agent, "From now on always reply to Alice in Portuguese", type="procedural", reason="user_explicit_preference"
    )
    assert staged["decision"] == "PENDING", staged
    confirmed = await stack.http.post(f"/v1/memories/{staged['memory_id']}/confirm", headers=alice)
    assert confirmed.status_code == 200 and confirmed.json()["decision"] == "ADD", confirmed.text
    # Correct, then put the correction under a legal hold.
    colour = await remember(agent, "Alice's favourite glaze colour is celadon", slot="user.glaze")
    patched = await stack.http.patch(
        f"/v1/memories/{colour['memory_id']}",
        headers=alice,
        json={"content": "Alice's favourite glaze colour is tenmoku"},
    )
    assert patched.status_code == 200 and patched.json()["decision"] == "UPDATE", patched.text
    held = await stack.http.put(
        f"/v1/memories/{patched.json()['memory_id']}/retention", headers=ops, json={"retention_class": "legal-hold"}
    )
    assert held.status_code == 200, held.text
    # Summarize two episodes; switch memory on (a settings event), export, forget one memory.
    for day in ("monday", "tuesday"):
        await remember(agent, f"synthetic: alice trimmed a bowl on {day}", type="episodic", reason="task_outcome")
    key_bytes = subject_key(stack.settings.auth_secret_value)
    summary = await stack.temporal.execute_workflow(
        SummarizeWorkflow.run,
        await park_summary_request(stack.deps.store, key_bytes, tenant_id=t, owner_id="alice", actor="user:alice"),
        id=f"summarize-{uuid.uuid4()}",
        task_queue=stack.settings.temporal_task_queue,
    )
    assert summary.summary_id is not None
    assert (await stack.http.put("/v1/settings", headers=alice, json={"memory_enabled": True})).status_code == 200
    assert (await stack.http.get("/v1/export", headers=alice)).status_code == 200
    forgotten = await stack.http.delete(f"/v1/memories/{staged['memory_id']}", headers=alice)
    assert forgotten.status_code == 202, forgotten.text

    events: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 200} | ({"cursor": cursor} if cursor else {})
        page = await stack.http.get("/v1/audit", headers=ops, params=params)
        assert page.status_code == 200, page.text
        events += page.json()["items"]
        cursor = page.json()["next_cursor"]
        if cursor is None:
            break

    def recorded(event: dict[str, Any]) -> str | None:
        """Which path recorded an event (None: one that is about no single namespace)."""
        op, reason, details = event["operation"], event["reason"], event["details"] or {}
        if op == "revalidate":
            return f"revalidate:{details.get('trigger')}:{'api' if event['actor'] == 'system:programs' else 'worker'}"
        if op == "update" and "retention_class_to" in details:
            return "retention"
        if op == "update" and reason == "owner_correction":
            return "correct"
        return None if op in ("read", "forget_requested", "forget_receipt") else op

    by_path: dict[str, set[str | None]] = {}
    for event in events:
        path = recorded(event)
        if path is None:
            assert event["memory_id"] is None and event["namespace"] is None, event
        else:
            by_path.setdefault(path, set()).add(event["namespace"])
    expected = Pseudonymizer(key_bytes).namespace(
        t, namespace_label(Namespace(tenant_id=t, scope=Scope.USER, owner_id="alice"))
    )
    assert expected is not None and expected.startswith("user:~")
    paths = {
        "create", "update", "stage", "confirm", "correct", "retention", "summarize", "settings", "export", "delete",
        "revalidate:read_time:worker", "revalidate:event:api", "revalidate:event:worker",
    }  # fmt: skip
    assert paths <= set(by_path), sorted(by_path)
    assert {path: labels for path, labels in by_path.items() if labels != {expected}} == {}
