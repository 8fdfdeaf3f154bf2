"""PATCH /v1/memories/{id} (the owner's correction) and GET /v1/export, over real HTTP.

One embedded stack for the module (Temporal dev server, worker over SQLite + Qdrant Edge, the API
under uvicorn), with the SDK's in-memory span exporter installed first (the only stand-in: it is the
SDK's own test exporter), so the `update_memory` span tree the real interceptors produce can be read.
Texts are synthetic and distinctive, so a leak of any of their words into a span or an audit row
would be found.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memwarden import telemetry
from memwarden.forget import subject_key
from memwarden.stores.audit import Pseudonymizer
from memwarden.temporal.names import REMEMBER_CANDIDATE
from tests.integration.api_stack import Api, assert_problem, embedded_api, remember

ORIGINAL = "Zephyrine Calloway keeps marmalade jars from Trondheim harbour"
CORRECTED = "Zephyrine Calloway keeps quince preserves from Bergen harbour"
WORDS = {w.lower() for w in re.findall(r"[A-Za-z]{6,}", ORIGINAL + " " + CORRECTED)}


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    telemetry.setup(span_exporter=exporter)
    return exporter


@pytest.fixture(scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory, spans: InMemorySpanExporter) -> AsyncIterator[Api]:
    async with embedded_api(tmp_path_factory.mktemp("correct")) as stack:
        yield stack


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


async def get(http: httpx.AsyncClient, headers: dict[str, str], memory_id: str) -> dict[str, Any]:
    response = await http.get(f"/v1/memories/{memory_id}", headers=headers)
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


async def test_a_correction_supersedes_the_slot_holder_and_keeps_it_as_history(
    http: httpx.AsyncClient, api: Api
) -> None:
    t = tenant()
    alice = api.auth(t, "alice")
    first = await remember(http, alice, content="My home city is Lisbon", type="fact", slot="user.city")
    patched = await http.patch(
        f"/v1/memories/{first['memory_id']}", headers=alice, json={"content": "My home city is Porto"}
    )
    assert patched.status_code == 200, patched.text
    answer = patched.json()
    assert answer["decision"] == "UPDATE" and answer["reason"] == "slot_value_changed"
    assert answer["supersedes"] == first["memory_id"] and answer["memory_id"] != first["memory_id"]
    assert answer["workflow_id"] == f"remember-{answer['memory_id']}"

    old = await get(http, alice, first["memory_id"])
    assert old["status"] == "superseded" and old["superseded_by"] == answer["memory_id"]
    new = await get(http, alice, answer["memory_id"])
    assert new["status"] == "active" and new["content"] == "My home city is Porto"
    assert new["slot"] == "user.city" and new["source_kind"] == "user" and new["reason"] == "user_stated_fact"
    assert new["provenance"]["writer"] == "user:alice"
    assert [h["id"] for h in new["history"]] == [first["memory_id"]]
    # one live value for the slot: the listing shows only the correction
    listed = (await http.get("/v1/memories", headers=alice)).json()["items"]
    assert [m["id"] for m in listed] == [answer["memory_id"]]


async def test_a_slotless_memory_adopts_an_edit_slot_so_corrections_chain(http: httpx.AsyncClient, api: Api) -> None:
    t = tenant()
    alice = api.auth(t, "alice")
    first = await remember(http, alice, content="Enjoys long walks along the river on Sundays", type="preference")
    one = (
        await http.patch(
            f"/v1/memories/{first['memory_id']}", headers=alice, json={"content": "Enjoys cycling on Saturdays"}
        )
    ).json()
    assert one["decision"] == "UPDATE" and one["supersedes"] == first["memory_id"], one
    two = (
        await http.patch(f"/v1/memories/{one['memory_id']}", headers=alice, json={"content": "Enjoys swimming at dawn"})
    ).json()
    assert two["decision"] == "UPDATE" and two["supersedes"] == one["memory_id"], two
    latest = await get(http, alice, two["memory_id"])
    assert latest["slot"] == f"edit.{first['memory_id']}"
    assert latest["reason"] == "user_stated_fact"  # the memory's own reason, which a person may give
    assert [h["id"] for h in latest["history"]] == [one["memory_id"], first["memory_id"]]
    assert all(h["status"] == "superseded" for h in latest["history"])


async def test_corrections_pass_the_gate_rejections_keep_the_old_version(http: httpx.AsyncClient, api: Api) -> None:
    t = tenant()
    alice = api.auth(t, "alice")
    first = await remember(http, alice, content="Uses the staging cluster for demos", type="fact", slot="work.cluster")
    secret = "my deploy key is AKIAIOSFODNN7EXAMPLE with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    rejected = await http.patch(f"/v1/memories/{first['memory_id']}", headers=alice, json={"content": secret})
    assert rejected.status_code == 200
    assert rejected.json()["decision"] == "REJECT" and rejected.json()["reason"] == "secret_detected"
    assert "AKIA" not in rejected.text and rejected.json()["memory_id"] is None
    same = (
        await http.patch(
            f"/v1/memories/{first['memory_id']}", headers=alice, json={"content": "Uses the staging cluster for demos"}
        )
    ).json()
    assert same["decision"] == "NOOP" and same["memory_id"] == first["memory_id"]
    behaviour = (
        await http.patch(
            f"/v1/memories/{first['memory_id']}",
            headers=alice,
            json={"content": "From now on always use the production cluster for demos"},
        )
    ).json()
    assert behaviour["decision"] == "PENDING" and behaviour["reason"] == "staged_behaviour_change", behaviour
    assert (await get(http, alice, first["memory_id"]))["status"] == "active"  # until the owner confirms
    confirmed = await http.post(f"/v1/memories/{behaviour['memory_id']}/confirm", headers=alice)
    assert confirmed.json()["decision"] == "UPDATE" and confirmed.json()["supersedes"] == first["memory_id"]
    assert (await get(http, alice, first["memory_id"]))["status"] == "superseded"


async def test_who_may_correct_what(http: httpx.AsyncClient, api: Api) -> None:
    t = tenant()
    alice, bob = api.auth(t, "alice"), api.auth(t, "bob")
    agent = api.auth(t, "svc", "agent", agent="planner", on_behalf_of="alice")
    mine = await remember(http, alice, content="Drinks oat milk", type="preference", slot="diet.milk")
    url = f"/v1/memories/{mine['memory_id']}"
    body = {"content": "Drinks soy milk"}
    assert_problem(await http.patch(url, headers=bob, json=body), 404, field="memory_id", code="not_found")
    assert_problem(await http.patch(url, headers=api.auth(tenant(), "alice"), json=body), 404, code="not_found")
    assert_problem(await http.patch(f"/v1/memories/{uuid.uuid4()}", headers=alice, json=body), 404)
    assert_problem(await http.patch(url, headers=agent, json=body), 403, code="forbidden_role")
    assert_problem(await http.patch(url, headers=alice, json={"content": "  "}), 422, field="content")
    assert_problem(await http.patch(url, headers=alice, json={}), 422, field="content")
    assert_problem(await http.patch(url, headers=alice, json={**body, "colour": 1}), 422, field="colour")
    assert_problem(await http.patch(url, headers=alice, json={"content": "x" * 5000}), 413, field="content")
    assert_problem(
        await http.patch(url, headers=alice, json={**body, "expected_version": 99}), 409, code="version_conflict"
    )
    # an agent's private memory about alice is hers to correct; it stays in the agent's namespace
    kept = await remember(http, agent, content="Alice books aisle seats", type="preference", scope="agent", slot="seat")
    fixed = (
        await http.patch(
            f"/v1/memories/{kept['memory_id']}", headers=alice, json={"content": "Alice books window seats"}
        )
    ).json()
    assert fixed["decision"] == "UPDATE"
    new = await get(http, alice, fixed["memory_id"])
    assert new["scope"] == "agent" and new["agent_id"] == "planner" and new["owner_id"] == "alice"
    # past versions are history, not editable
    done = (await http.patch(url, headers=alice, json=body)).json()
    assert done["decision"] == "UPDATE"
    assert_problem(await http.patch(url, headers=alice, json={"content": "Drinks rice milk"}), 409, code="not_live")


async def test_the_same_idempotency_key_gives_the_same_answer(http: httpx.AsyncClient, api: Api) -> None:
    t = tenant()
    alice = api.auth(t, "alice")
    first = await remember(http, alice, content="Works from the Oslo office", type="fact", slot="work.office")
    body = {"content": "Works from the Bergen office", "idempotency_key": "fix-office-1"}
    one = (await http.patch(f"/v1/memories/{first['memory_id']}", headers=alice, json=body)).json()
    two = (await http.patch(f"/v1/memories/{first['memory_id']}", headers=alice, json=body)).json()
    assert one == two and one["decision"] == "UPDATE"
    other = await http.patch(
        f"/v1/memories/{first['memory_id']}", headers=alice, json={**body, "content": "Works from the Tromso office"}
    )
    assert_problem(other, 409, code="idempotency_key_reused")


def _trace(spans: list[ReadableSpan], root: ReadableSpan) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in spans if s.context.trace_id == root.context.trace_id}


def _ancestors(span: ReadableSpan, index: dict[int, ReadableSpan]) -> list[str]:
    names, parent = [], span.parent
    while parent is not None and parent.span_id in index:
        names.append(index[parent.span_id].name)
        parent = index[parent.span_id].parent
    return names


async def test_update_span_tree_and_audit_event_carry_no_content(
    http: httpx.AsyncClient, api: Api, spans: InMemorySpanExporter
) -> None:
    t = tenant()
    alice = api.auth(t, "alice")
    first = await remember(http, alice, content=ORIGINAL, type="fact", slot="hobby.jars")
    answer = (await http.patch(f"/v1/memories/{first['memory_id']}", headers=alice, json={"content": CORRECTED})).json()
    assert answer["decision"] == "UPDATE"

    finished = list(spans.get_finished_spans())
    [update] = [
        s
        for s in finished
        if s.name == "update_memory" and s.attributes.get("gen_ai.memory.record.id") == answer["memory_id"]
    ]
    attrs = dict(update.attributes or {})
    assert attrs["gen_ai.operation.name"] == "update_memory" and attrs["memwarden.tenant"] == t
    assert attrs["memwarden.decision"] == "UPDATE" and attrs["memwarden.reason"] == "slot_value_changed"
    assert attrs["memwarden.supersedes"] == first["memory_id"]
    assert attrs["memwarden.workflow.id"] == answer["workflow_id"]
    assert set(attrs) <= telemetry.ALLOWED_ATTRIBUTES
    index = _trace(finished, update)
    names = {s.name for s in index.values()}
    assert "RunWorkflow:RememberWorkflow" in names and f"RunActivity:{REMEMBER_CANDIDATE}" in names, names
    for span in index.values():
        if span.name.startswith("RunActivity:"):
            assert _ancestors(span, index)[-2:] == ["StartWorkflow:RememberWorkflow", "update_memory"]
    for span in index.values():
        text = " ".join([span.name, *(f"{k}={v}" for k, v in (span.attributes or {}).items())]).lower()
        assert not {w for w in WORDS if w in text}, (span.name, text)

    audit = await http.get(
        "/v1/audit", params={"memory_id": first["memory_id"]}, headers=api.auth(t, "ops", "operator")
    )
    assert audit.status_code == 200, audit.text
    events = audit.json()["items"]
    [update_event] = [e for e in events if e["operation"] == "update" and e["reason"] == "owner_correction"]
    # Person ids are stored as keyed hashes (the receipts' scheme); the clear id still filters.
    pseudonyms = Pseudonymizer(subject_key(api.settings.auth_secret_value))
    assert update_event["actor"] == pseudonyms.actor(t, "user:alice") != "user:alice"
    [created] = [e for e in events if e["operation"] == "create"]
    assert update_event["hash_before"] == created["hash_after"]
    assert update_event["hash_after"] and update_event["hash_after"] != update_event["hash_before"]
    assert update_event["details"]["new_memory_id"] == answer["memory_id"]
    assert update_event["workflow_id"] == answer["workflow_id"]
    dumped = json.dumps(events).lower()
    assert not {w for w in WORDS if w in dumped}


async def test_export_holds_every_version_and_status_of_the_subject_only(http: httpx.AsyncClient, api: Api) -> None:
    t = tenant()
    alice, bob = api.auth(t, "alice"), api.auth(t, "bob")
    first = await remember(http, alice, content="Lives in Gdansk", type="fact", slot="user.city")
    fixed = (
        await http.patch(f"/v1/memories/{first['memory_id']}", headers=alice, json={"content": "Lives in Krakow"})
    ).json()
    pending = await remember(
        http, alice, content="From now on always reply in Polish", type="procedural", reason="user_explicit_preference"
    )
    assert pending["decision"] == "PENDING"
    bobs = await remember(http, bob, content="Lives in Riga", type="fact")
    deleted = await remember(http, alice, content="Owns a grey bicycle", type="fact")
    forgot = await http.delete(f"/v1/memories/{deleted['memory_id']}", headers=alice)
    assert forgot.status_code == 202

    export = await http.get("/v1/export", headers=alice)
    assert export.status_code == 200, export.text
    doc = export.json()
    assert doc["format"] == "memwarden.export/1" and doc["owner_id"] == "alice" and doc["tenant"] == t
    by_id = {m["id"]: m for m in doc["memories"]}
    assert by_id[first["memory_id"]]["status"] == "superseded"
    assert by_id[fixed["memory_id"]]["status"] == "active" and by_id[fixed["memory_id"]]["content"] == "Lives in Krakow"
    assert by_id[pending["memory_id"]]["status"] == "pending"
    assert by_id[deleted["memory_id"]]["status"] in ("tombstoned", "purged")
    assert bobs["memory_id"] not in by_id
    assert doc["settings"] == {"memory_enabled": True}
    assert [d["deletion_id"] for d in doc["deletions"]] == [forgot.json()["deletion_id"]]

    privacy = await http.get("/v1/export", params={"owner_id": "alice"}, headers=api.auth(t, "dpo", "privacy"))
    assert privacy.status_code == 200 and {m["id"] for m in privacy.json()["memories"]} == set(by_id)
    assert_problem(await http.get("/v1/export", headers=api.auth(t, "dpo", "privacy")), 422, field="owner_id")
    assert_problem(await http.get("/v1/export", params={"owner_id": "bob"}, headers=alice), 403, code="owner_mismatch")
    agent = api.auth(t, "svc", "agent", agent="planner", on_behalf_of="alice")
    assert_problem(await http.get("/v1/export", headers=agent), 403, code="forbidden_role")
    assert_problem(await http.get("/v1/export"), 401)


def test_templates_and_static_files_ship_as_package_data() -> None:
    """The page must work from an installed wheel, not only from a checkout."""
    import tomllib

    root = Path(__file__).resolve().parents[2]
    data = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["api"]
    shipped = {p.relative_to(root / "api") for pattern in data for p in (root / "api").glob(pattern)}
    on_disk = {
        p.relative_to(root / "api")
        for p in (root / "api" / "me").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".py"
    }
    assert on_disk and on_disk <= shipped, on_disk - shipped


async def test_the_python_client_corrects_and_exports(api: Api) -> None:
    from memwarden.client import MemwardenClient, MemwardenError

    t = tenant()
    async with MemwardenClient(api.base_url, api.token(t, "alice")) as alice:
        first = await alice.remember(
            "Favourite colour is teal",
            type="preference",
            source_kind="user",
            reason="user_explicit_preference",
            slot="colour",
        )
        fixed = await alice.correct(first.memory_id or "", "Favourite colour is amber", expected_version=1)
        assert fixed.decision == "UPDATE" and fixed.supersedes == first.memory_id
        with pytest.raises(MemwardenError) as raised:
            await alice.correct(first.memory_id or "", "Favourite colour is red")
        assert raised.value.status == 409
        exported = await alice.export()
        assert {m["id"] for m in exported["memories"]} == {first.memory_id, fixed.memory_id}
