"""PUT /v1/memories/{id}/retention over real HTTP: who may assign a class, and what the sweep then does.

One embedded stack (dev server, worker over SQLite + Qdrant Edge, the API under uvicorn) configured
with a `legal-hold` class (the sweep never takes it) and a `short` class (an age limit).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import httpx
import pytest

from memwarden.records import Status
from tests.forget_support import an_hour_ago, seed, tenant, wait_verified
from tests.integration.api_stack import assert_problem
from tests.stack_support import Stack, embedded_stack

CLASSES = {"standard": {}, "legal-hold": {"hold": True}, "short": {"max_age_days": 30}}


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    async with embedded_stack(tmp_path_factory.mktemp("retention-data"), retention_classes=CLASSES) as s:
        yield s


@pytest.fixture
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30.0) as client:
        yield client


async def test_a_hold_keeps_a_memory_past_its_expiry_and_is_audited(stack: Stack, http: httpx.AsyncClient) -> None:
    t = tenant()
    # Written an hour ago with a one-second TTL: both are past their expiry when the sweep runs.
    written, ttl = an_hour_ago(), timedelta(seconds=1)
    held = await seed(stack.deps, t, "alice", "alice's parcel 7731 arrives friday", expires_in=ttl, at=written)
    other = await seed(stack.deps, t, "alice", "alice's parcel 7732 arrives monday", expires_in=ttl, at=written)
    ops = stack.auth(t, "ops", role="operator")

    answer = await http.put(f"/v1/memories/{held.id}/retention", json={"retention_class": "legal-hold"}, headers=ops)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"memory_id": held.id, "retention_class": "legal-hold", "previous": "standard"}
    again = await http.put(f"/v1/memories/{held.id}/retention", json={"retention_class": "legal-hold"}, headers=ops)
    assert again.json()["previous"] == "legal-hold"

    sweep = await http.post("/v1/forget", json={"selector": {"kind": "expired"}, "reason": "retention"}, headers=ops)
    assert sweep.status_code == 202, sweep.text
    receipt = await wait_verified(http, sweep.json()["deletion_id"], ops)
    assert receipt["counts"]["memories"] == 1
    kept = await stack.deps.store.get_memory(t, held.id)
    gone = await stack.deps.store.get_memory(t, other.id)
    assert kept is not None and gone is not None
    assert (kept.status, kept.retention_class, kept.content is not None) == (Status.ACTIVE, "legal-hold", True)
    assert gone.status is Status.EXPIRED

    listed, _ = await stack.deps.store.list_audit(t, memory_id=held.id, operation="update", limit=50, cursor=None)
    events = list(listed)
    assert len(events) == 1, "a repeat that changes nothing records nothing"
    assert events[0].reason == "retention_class_set"
    assert events[0].details == {"retention_class_from": "standard", "retention_class_to": "legal-hold"}
    assert "alice" not in events[0].model_dump_json()

    lifted = await http.put(f"/v1/memories/{held.id}/retention", json={"retention_class": "standard"}, headers=ops)
    assert lifted.json() == {"memory_id": held.id, "retention_class": "standard", "previous": "legal-hold"}
    sweep = await http.post("/v1/forget", json={"selector": {"kind": "expired"}, "reason": "retention"}, headers=ops)
    await wait_verified(http, sweep.json()["deletion_id"], ops)
    assert (await stack.deps.store.get_memory(t, held.id)).status is Status.EXPIRED  # type: ignore[union-attr]

    late = await http.put(f"/v1/memories/{held.id}/retention", json={"retention_class": "legal-hold"}, headers=ops)
    assert_problem(late, 409, code="content_gone")


async def test_who_may_assign_and_bad_input(stack: Stack, http: httpx.AsyncClient) -> None:
    t = tenant()
    mine = await seed(stack.deps, t, "alice", "alice keeps bees on the roof")
    url = f"/v1/memories/{mine.id}/retention"
    body = {"retention_class": "legal-hold"}
    for who in (
        stack.auth(t, "alice"),
        stack.auth(t, "svc", role="agent", agent="planner", on_behalf_of="alice"),
        stack.auth(t, "crm", role="system"),
    ):
        assert_problem(await http.put(url, json=body, headers=who), 403, code="forbidden_role")
    privacy = stack.auth(t, "dpo", role="privacy")
    assert_problem(
        await http.put(url, json={"retention_class": "forever"}, headers=privacy),
        422,
        field="retention_class",
        code="unknown_retention_class",
    )
    assert_problem(await http.put(url, json={"retention_class": ""}, headers=privacy), 422, field="retention_class")
    assert_problem(await http.put(url, json={"class": "short"}, headers=privacy), 422)
    elsewhere = stack.auth(tenant(), "dpo", role="privacy")
    assert_problem(await http.put(url, json=body, headers=elsewhere), 404, field="memory_id")
    assert_problem(await http.put("/v1/memories/no-such-id/retention", json=body, headers=privacy), 404)
    record = await stack.deps.store.get_memory(t, mine.id)
    assert record is not None and record.retention_class == "standard", "refused requests change nothing"

    answer = await http.put(url, json={"retention_class": "short"}, headers=privacy)
    assert answer.status_code == 200 and answer.json()["retention_class"] == "short"
