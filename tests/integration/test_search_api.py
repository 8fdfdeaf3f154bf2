"""`POST /v1/search` end to end over real HTTP: contract shape, filters, freshness, claim check, last use.

One embedded stack per module in this process (Temporal dev server, the production worker over
SQLite + Qdrant Edge, the API under uvicorn on a free port). Memories are placed through the store
and the index directly (what the commit activity does), so these tests exercise Retrieve alone and
do not depend on the write gate's decisions. Every text is synthetic; every test has its own tenant.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memwarden.config import Settings
from memwarden.identity import Principal, Role, mint_token, read_filter
from memwarden.policy.render import CONTEXT_HEADER
from memwarden.records import (
    MemoryRecord,
    MemoryType,
    Provenance,
    RetrieveResult,
    Scope,
    Sensitivity,
    SourceKind,
    SourceRef,
    Status,
    content_hash,
)
from memwarden.services.deps import Deps
from memwarden.stores.vectors import index_point
from tests.stack_support import embedded_stack


@dataclass
class Api:
    settings: Settings
    deps: Deps
    http: httpx.AsyncClient
    temporal: Any

    def auth(self, tenant: str, sub: str, role: str = "user", **claims: Any) -> dict[str, str]:
        token = mint_token(self.settings.auth_secret_value, tenant=tenant, sub=sub, role=role, **claims)
        return {"Authorization": f"Bearer {token}"}

    async def put(self, tenant: str, content: str, **fields: Any) -> MemoryRecord:
        """A committed memory: the row, then its index point (a lagging index is simulated by `index_status`)."""
        index_status = fields.pop("index_status", None)
        now = datetime.now(UTC)
        record = MemoryRecord(
            id=str(uuid.uuid4()),
            tenant_id=tenant,
            owner_id=fields.pop("owner_id", "alice"),
            type=fields.pop("type", MemoryType.FACT),
            content=content,
            content_hash=content_hash(content),
            source_kind=fields.pop("source_kind", SourceKind.USER),
            reason="user_stated_fact",
            created_at=fields.pop("created_at", now),
            updated_at=now,
            last_confirmed_at=now,
            **fields,
        )
        await self.deps.store.insert_memory(record)
        [dense] = await asyncio.to_thread(self.deps.embedder.embed, [content])
        point = index_point(record, dense)
        if index_status is not None:
            point = point.model_copy(update={"status": index_status})
        await self.deps.index.upsert([point])
        return record

    async def search(self, headers: dict[str, str], **body: Any) -> dict[str, Any]:
        answer = await self.http.post("/v1/search", headers=headers, json=body)
        assert answer.status_code == 200, answer.text
        return answer.json()  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    async with embedded_stack(tmp_path_factory.mktemp("search-api")) as stack:
        async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
            yield Api(settings=stack.settings, deps=stack.deps, http=http, temporal=stack.client)


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


async def test_results_have_the_contract_shape_and_a_labelled_context(api: Api) -> None:
    t = tenant()
    seat = await api.put(t, "synthetic: prefers window seats on long flights", type=MemoryType.PREFERENCE)
    await api.put(t, "synthetic: the quarterly report is due on friday")
    ref = await api.put(
        t,
        "synthetic: enrolled in the evening pottery program",
        source_kind=SourceKind.SYSTEM,
        source_ref=SourceRef(system="programs", key="p-1", version="v1"),
    )
    out = await api.search(api.auth(t, "alice"), query="where does she like to sit on a plane? window seats")
    assert set(out) == {"results", "withheld", "context", "workflow_id"}
    first = out["results"][0]
    assert first["memory_id"] == seat.id
    assert set(first) == {
        "memory_id",
        "content",
        "type",
        "slot",
        "score",
        "freshness",
        "source_kind",
        "source_ref",
        "created_at",
        "last_confirmed_at",
        "label",
    }
    assert first["content"] == seat.content and first["type"] == "preference" and first["freshness"] == "fresh"
    assert first["label"].startswith("[MEMORY type=preference sensitivity=low confirmed_at=")
    scores = [r["score"] for r in out["results"]]
    assert scores == sorted(scores, reverse=True) and all(0 < s <= 1 for s in scores)
    # the labelled block: header first, each memory after its label, closed at the end
    lines = out["context"].splitlines()
    assert lines[0] == CONTEXT_HEADER and lines[-1] == "[END MEMORY CONTEXT]"
    assert lines[1] == first["label"] and lines[2] == seat.content
    by_source = await api.search(api.auth(t, "alice"), query="pottery program")
    got = next(r for r in by_source["results"] if r["memory_id"] == ref.id)
    assert got["source_ref"] == {"system": "programs", "key": "p-1", "version": "v1"}
    assert "source=system:programs" in got["label"]


async def test_workflow_history_carries_ids_and_scores_only(api: Api) -> None:
    t = tenant()
    rec = await api.put(t, "synthetic: plays the cello in a community orchestra")
    out = await api.search(api.auth(t, "alice"), query="cello orchestra")
    handle = api.temporal.get_workflow_handle(out["workflow_id"], result_type=RetrieveResult)
    result = await handle.result()
    assert [h.memory_id for h in result.hits] == [rec.id]
    assert set(result.model_dump()) == {"hits", "withheld", "checks", "background"}
    assert result.checks == [] and result.background == []  # ids and codes only, and none needed here
    history = await handle.fetch_history()
    raw = history.to_json()
    assert "cello" not in raw and rec.content_hash not in raw  # payloads are sealed by the codec


async def test_the_query_claim_check_is_dropped_with_the_read_audit(api: Api) -> None:
    """The API parks the query before the workflow starts and the activity reads it from the store; the
    answer, its read event and the dropped claim check land together (one transaction)."""
    t = tenant()
    rec = await api.put(t, "synthetic: keeps bees on the allotment roof")
    out = await api.search(api.auth(t, "alice"), query="bees allotment")
    assert [r["memory_id"] for r in out["results"]] == [rec.id]
    assert await api.deps.store.get_candidate(f"query-{out['workflow_id']}") is None
    events, _ = await api.deps.store.list_audit(t, limit=10, cursor=None)
    [read] = [e for e in events if e.operation == "read"]
    assert read.workflow_id == out["workflow_id"] and read.details["returned"] == [rec.id]
    again = await api.search(api.auth(t, "alice"), query="bees allotment")
    assert [r["memory_id"] for r in again["results"]] == [rec.id]
    assert again["results"][0]["score"] == out["results"][0]["score"]  # the same vector every time
    assert await api.deps.store.get_candidate(f"query-{again['workflow_id']}") is None


async def test_the_person_a_query_names_ranks_their_own_turns_first(api: Api) -> None:
    """Two turns alike in every word; provenance says who said each. The query names one of them."""
    t = tenant()
    said = "synthetic: won the regional chess tournament last week"
    nate = await api.put(t, said, provenance=Provenance(session="s1", turn="D1:2", speaker="Nate"))
    joanna = await api.put(t, said, provenance=Provenance(session="s2", turn="D2:7", speaker="Joanna"))
    alice = api.auth(t, "alice")
    for name, first in (("Nate", nate), ("Joanna", joanna), ("NATE's", nate)):
        out = await api.search(alice, query=f"What did {name} win at the chess tournament?")
        assert [r["memory_id"] for r in out["results"]][:2] == [first.id, ({nate.id, joanna.id} - {first.id}).pop()]
        assert out["results"][0]["score"] > out["results"][1]["score"]
    # A query that names neither: the two tie on score (the order between them is then by id).
    out = await api.search(alice, query="Who won the regional chess tournament?")
    assert out["results"][0]["score"] == pytest.approx(out["results"][1]["score"])


async def test_k_default_five_and_at_most_fifty(api: Api) -> None:
    t = tenant()
    for i in range(8):
        await api.put(t, f"synthetic: garden note {i} about tomatoes and basil")
    out = await api.search(api.auth(t, "alice"), query="tomatoes basil garden")
    assert len(out["results"]) == 5
    out = await api.search(api.auth(t, "alice"), query="tomatoes basil garden", k=7)
    assert len(out["results"]) == 7
    too_many = await api.http.post("/v1/search", headers=api.auth(t, "alice"), json={"query": "x", "k": 51})
    assert too_many.status_code == 422 and too_many.json()["errors"][0]["field"] == "k"


async def test_relevance_floor_drops_what_is_not_about_the_query(api: Api) -> None:
    t = tenant()
    await api.put(t, "synthetic: allergic to peanuts and shellfish")
    out = await api.search(api.auth(t, "alice"), query="quantum chromodynamics lattice gauge")
    assert out["results"] == [] and out["context"] == ""


async def test_type_and_sensitivity_filters(api: Api) -> None:
    t = tenant()
    text = "synthetic: the locker code is kept in the blue notebook"
    fact = await api.put(t, text, type=MemoryType.FACT, sensitivity=Sensitivity.LOW)
    task = await api.put(t, text + " (task)", type=MemoryType.TASK, sensitivity=Sensitivity.LOW)
    secret = await api.put(t, text + " (restricted)", type=MemoryType.FACT, sensitivity=Sensitivity.RESTRICTED)
    alice = api.auth(t, "alice")
    ids = lambda out: {r["memory_id"] for r in out["results"]}  # noqa: E731
    assert ids(await api.search(alice, query=text)) == {fact.id, task.id, secret.id}
    assert ids(await api.search(alice, query=text, types=["task"])) == {task.id}
    assert ids(await api.search(alice, query=text, types=["fact"], max_sensitivity="confidential")) == {fact.id}
    assert ids(await api.search(alice, query=text, max_sensitivity="public")) == set()
    bad = await api.http.post("/v1/search", headers=alice, json={"query": text, "max_sensitivity": "secret"})
    assert bad.status_code == 422 and "max_sensitivity" in bad.json()["errors"][0]["field"]


async def test_stale_is_marked_and_withheld_on_high_consequence(api: Api) -> None:
    t = tenant()
    stale = await api.put(t, "synthetic: the gate code for the depot is 4711", status=Status.STALE)
    alice = api.auth(t, "alice")
    low = await api.search(alice, query="depot gate code")
    assert [(r["memory_id"], r["freshness"]) for r in low["results"]] == [(stale.id, "stale")]
    assert "freshness=stale" in low["context"]
    high = await api.search(alice, query="depot gate code", consequence="high")
    assert high["results"] == [] and high["withheld"] == [{"memory_id": stale.id, "reason": "stale"}]
    # a withheld memory does not take a slot: the next eligible one fills it
    fresh = await api.put(t, "synthetic: the depot gate opens at six")
    high = await api.search(alice, query="depot gate code", consequence="high", k=1)
    assert [r["memory_id"] for r in high["results"]] == [fresh.id]
    assert high["withheld"] == [{"memory_id": stale.id, "reason": "stale"}]


async def test_store_is_rechecked_when_the_index_lags_a_tombstone(api: Api) -> None:
    t = tenant()
    gone = await api.put(
        t, "synthetic: my old address was on harbour street", status=Status.TOMBSTONED, index_status=Status.ACTIVE
    )
    kept = await api.put(t, "synthetic: my new flat is near the harbour park")
    # the index still offers the tombstoned point: the store's re-check keeps it out
    found = await api.deps.index.hybrid(
        dense=(await asyncio.to_thread(api.deps.embedder.embed, ["harbour street address"]))[0],
        text="harbour street address",
        read_filter=read_filter(Principal(tenant=t, sub="alice", role=Role.USER)),
        now_ts=time.time(),
        limit=10,
    )
    assert gone.id in {h.memory_id for h in found.dense}
    out = await api.search(api.auth(t, "alice"), query="harbour street address")
    assert [r["memory_id"] for r in out["results"]] == [kept.id]


async def test_namespaces_other_tenant_other_agent_shared_store(api: Api) -> None:
    t, other = tenant(), tenant()
    text = "synthetic: the standup moved to nine thirty"
    mine = await api.put(t, text)
    agent_note = await api.put(t, text + " (planner)", scope=Scope.AGENT, agent_id="planner")
    other_agent = await api.put(t, text + " (scribe)", scope=Scope.AGENT, agent_id="scribe")
    shared = await api.put(t, text + " (team)", scope=Scope.SHARED, store="team-x", owner_id="bob")
    await api.put(other, text)  # same owner name, another tenant
    ids = lambda out: {r["memory_id"] for r in out["results"]}  # noqa: E731
    planner = api.auth(t, "svc", "agent", agent="planner", on_behalf_of="alice", stores=["team-x"])
    assert ids(await api.search(planner, query=text, k=10)) == {mine.id, agent_note.id, shared.id}
    alice = api.auth(t, "alice")
    assert ids(await api.search(alice, query=text, k=10)) == {mine.id, agent_note.id, other_agent.id}
    bob_other_tenant = api.auth(other, "bob", stores=["team-x"])
    assert shared.id not in ids(await api.search(bob_other_tenant, query=text, k=10))


async def test_last_used_at_is_written_with_the_read_before_the_answer(api: Api) -> None:
    t = tenant()
    rec = await api.put(t, "synthetic: likes strong black coffee in the morning")
    unread = await api.put(t, "synthetic: keeps a bicycle in the hallway")
    before = datetime.now(UTC) - timedelta(seconds=1)
    out = await api.search(api.auth(t, "alice"), query="black coffee")
    assert [r["memory_id"] for r in out["results"]] == [rec.id]
    # no waiting: the use is in the answer's transaction, beside the read's audit event
    stored = await api.deps.store.get_memory(t, rec.id)
    assert stored is not None and stored.last_used_at is not None and stored.last_used_at >= before
    assert stored.version == rec.version  # a use is not an edit
    other = await api.deps.store.get_memory(t, unread.id)
    assert other is not None and other.last_used_at is None  # only what was served is touched


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    role=st.sampled_from(["user", "agent"]),
    sub=st.sampled_from(["alice", "bob", "svc"]),
    agent=st.sampled_from(["planner", "scribe"]),
    on_behalf_of=st.sampled_from(["alice", "bob"]),
    stores=st.lists(st.sampled_from(["team-x", "team-y"]), unique=True, max_size=2),
)
async def test_another_tenants_id_is_404_and_never_searchable(
    api: Api, role: str, sub: str, agent: str, on_behalf_of: str, stores: list[str]
) -> None:
    home, foreign = tenant(), tenant()
    text = "synthetic: the spare key is under the zebrawood shelf"
    mine = [
        await api.put(home, text),
        await api.put(home, text + " (planner)", scope=Scope.AGENT, agent_id="planner"),
        await api.put(home, text + " (team)", scope=Scope.SHARED, store="team-x"),
    ]
    claims: dict[str, Any] = {"stores": stores}
    if role == "agent":
        claims |= {"agent": agent, "on_behalf_of": on_behalf_of}
    stranger = api.auth(foreign, sub, role, **claims)
    unknown = await api.http.get(f"/v1/memories/{uuid.uuid4()}", headers=stranger)
    for record in mine:
        answer = await api.http.get(f"/v1/memories/{record.id}", headers=stranger)
        assert answer.status_code == 404
        # indistinguishable from an id that does not exist (but for the path it names)
        assert {k: v for k, v in answer.json().items() if k != "instance"} == {
            k: v for k, v in unknown.json().items() if k != "instance"
        }
    found = await api.search(stranger, query=text, k=50)
    assert not {r["memory_id"] for r in found["results"]} & {r.id for r in mine}
