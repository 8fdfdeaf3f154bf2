"""The codec server is tenant-bound and leaves no tokens behind; workers refuse unencrypted payloads.

The embedded stack (dev server, worker, API): two tenants write, and each tenant's operator reads
history through `/codec/decode`, as the Temporal UI and CLI do; then a client with Temporal's plain
data converter (no codec), as anyone who reaches the frontend could, sends a `settle` update to a
pending write.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import uuid
from typing import Any

import httpx
import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from memwarden.records import SettleAction, SettleRequest, Status
from memwarden.temporal.codec import ENCODING, TENANT_METADATA, WORKFLOW_METADATA, AesGcmCodec, CodecError
from memwarden.temporal.converter import data_converter
from memwarden.temporal.names import pending_workflow_id
from tests.integration.api_stack import MEMORY, Api, assert_problem
from workflows.pending import PendingWriteWorkflow


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


async def sealed(api: Api, client: Client, workflow_id: str) -> list[dict[str, Any]]:
    """The payloads the Temporal UI sends to decode: every one in the history, as the protocol has them."""
    return [{k: v for k, v in p.items() if k != "_path"} for p in await history_payloads(api, client, workflow_id)]


async def history_payloads(api: Api, client: Client, workflow_id: str) -> list[dict[str, Any]]:
    """Every payload of a workflow's history as the server holds it, with `_path` saying where it sits."""
    history = await client.workflow_service.get_workflow_execution_history(
        GetWorkflowExecutionHistoryRequest(
            namespace=api.settings.temporal_namespace, execution={"workflow_id": workflow_id}
        )
    )
    found: list[dict[str, Any]] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, dict):
            if "data" in value and "metadata" in value and "encoding" in value["metadata"]:
                found.append(value | {"_path": path})
            for key, child in value.items():
                walk(child, f"{path}.{key}")
        elif isinstance(value, list):
            for child in value:
                walk(child, path)

    walk(json_format.MessageToDict(history.history), "")
    return found


def tag(api: Api, tenant_id: str) -> str:
    return AesGcmCodec(api.settings.codec_key_bytes).tenant_tag(tenant_id)


def meta(payload: dict[str, Any], key: str) -> str:
    return base64.b64decode(payload["metadata"].get(key, "")).decode()


@pytest.fixture(scope="module")
async def temporal(api: Api) -> Client:
    return await Client.connect(api.settings.temporal_address, data_converter=data_converter(api.settings))


async def test_each_payload_is_bound_to_its_tenant_and_workflow(
    api: Api, http: httpx.AsyncClient, temporal: Client
) -> None:
    t = tenant()
    written = await http.post("/v1/memories", headers=api.auth(t, "alice"), json=MEMORY)
    assert written.status_code == 200, written.text
    workflow_id = written.json()["workflow_id"]
    payloads = await history_payloads(api, temporal, workflow_id)
    data = [p for p in payloads if p["_path"].endswith((".input.payloads", ".result.payloads"))]
    assert len(data) >= 3  # the input, the local activity's result, the workflow's result
    for p in data:
        assert meta(p, "encoding") == ENCODING.decode(), p["_path"]
        assert (meta(p, TENANT_METADATA), meta(p, WORKFLOW_METADATA)) == (tag(api, t), workflow_id), p["_path"]
        assert t not in meta(p, TENANT_METADATA)  # history names the tenant by a keyed tag only
    # The SDK's own trace header and marker data carry ids only and name no tenant: no tenant's
    # operator opens them.
    for p in payloads:
        if p not in data and meta(p, "encoding") == ENCODING.decode():
            assert meta(p, TENANT_METADATA) == "", p["_path"]
    payloads = [{k: v for k, v in p.items() if k != "_path"} for p in data]
    # The binding is authenticated: a payload moved to another tenant does not open.
    [first] = payloads[:1]
    moved = json_format.ParseDict(
        first | {"metadata": first["metadata"] | {TENANT_METADATA: base64.b64encode(b"other").decode()}}, Payload()
    )
    with pytest.raises(CodecError):
        await AesGcmCodec(api.settings.codec_key_bytes).decode([moved])


async def test_an_operator_decodes_only_their_tenants_payloads_and_each_decode_is_audited(
    api: Api, http: httpx.AsyncClient, temporal: Client
) -> None:
    mine, theirs = tenant(), tenant()
    ids = {}
    for t in (mine, theirs):
        answer = await http.post("/v1/memories", headers=api.auth(t, "alice"), json=MEMORY | {"content": f"tea in {t}"})
        assert answer.status_code == 200, answer.text
        ids[t] = answer.json()["workflow_id"]
    operator = api.auth(mine, "ops-1", "operator")
    body = {"payloads": await sealed(api, temporal, ids[mine]) + await sealed(api, temporal, ids[theirs])}
    answer = await http.post("/codec/decode", json=body, headers=operator | {"X-Namespace": "default"})
    assert answer.status_code == 200, answer.text
    out = answer.json()["payloads"]
    own = sum(1 for p in body["payloads"] if meta(p, TENANT_METADATA) == tag(api, mine))
    assert own >= 3
    for sent, got in zip(body["payloads"], out, strict=True):
        if meta(sent, TENANT_METADATA) == tag(api, mine):
            assert meta(got, "encoding") == "json/plain"  # opened
        else:
            assert got == sent  # the other tenant's, or no tenant's: back as they came, byte for byte
    refused = sum(1 for p in body["payloads"] if meta(p, "encoding") == ENCODING.decode()) - own
    assert f"tea in {theirs}" not in answer.text and f"tea in {mine}" not in answer.text  # claim checks, not content

    events, _ = await api.store.list_audit(mine, operation="codec_decode", limit=10, cursor=None)
    [event] = events
    run_id = (await temporal.get_workflow_handle(ids[mine]).describe()).run_id
    assert event.workflow_id == ids[mine] and event.details["run_id"] == run_id
    assert (event.details["payloads"], event.details["refused"]) == (own, refused)
    assert (await api.store.list_audit(theirs, operation="codec_decode", limit=10, cursor=None))[0] == []

    # Their operator reads theirs, and mine stays sealed for them.
    other = await http.post("/codec/decode", json=body, headers=api.auth(theirs, "ops-9", "operator"))
    for sent, got in zip(body["payloads"], other.json()["payloads"], strict=True):
        assert (got == sent) is (meta(sent, TENANT_METADATA) != tag(api, theirs))
    # A run named by the caller is the run audited.
    await http.post("/codec/decode", json=body, headers=operator, params={"run_id": "r-given"})
    events, _ = await api.store.list_audit(mine, operation="codec_decode", limit=10, cursor=None)
    assert events[0].details["run_id"] == "r-given"


async def test_header_tokens_win_over_path_tokens_and_no_token_is_echoed(
    api: Api, http: httpx.AsyncClient, temporal: Client
) -> None:
    t = tenant()
    answer = await http.post("/v1/memories", headers=api.auth(t, "alice"), json=MEMORY)
    body = {"payloads": await sealed(api, temporal, answer.json()["workflow_id"])}
    operator = api.token(t, "ops-1", "operator")
    user = api.token(t, "alice")
    # A user's token in the path, the operator's in the header: the header decides.
    opened = await http.post(f"/codec/t/{user}/decode", json=body, headers={"Authorization": f"Bearer {operator}"})
    assert opened.status_code == 200, opened.text
    # The other way round: refused, and neither token is in the problem.
    refused = await http.post(f"/codec/t/{operator}/decode", json=body, headers={"Authorization": f"Bearer {user}"})
    assert_problem(refused, 403, code="forbidden_role")
    assert operator not in refused.text and user not in refused.text
    bad = await http.post("/codec/t/not.a-token/decode", json=body)
    assert_problem(bad, 401)
    assert "not.a-token" not in bad.text
    assert bad.json()["instance"] == "/codec/t/~/decode"
    for path in ("/codec/encode", f"/codec/t/{operator}/encode"):
        gone = await http.post(path, json=body, headers={"Authorization": f"Bearer {operator}"})
        assert gone.status_code in (404, 405) and operator not in gone.text


async def test_the_worker_refuses_a_plaintext_settle_update(api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()
    agent = api.auth(t, "svc", "agent", agent="planner", on_behalf_of="alice")
    staged = await http.post(
        "/v1/memories",
        headers=agent,
        json={
            "content": "From now on always reply to Alice in French",
            "type": "procedural",
            "source_kind": "user",
            "reason": "user_explicit_preference",
        },
    )
    assert staged.status_code == 200 and staged.json()["decision"] == "PENDING", staged.text
    memory_id = staged.json()["memory_id"]
    # Anyone who can reach the frontend, without the codec: Temporal's own converter, plaintext JSON.
    plain = await Client.connect(
        api.settings.temporal_address, data_converter=dataclasses.replace(pydantic_data_converter)
    )
    handle = plain.get_workflow_handle(pending_workflow_id(memory_id))
    forged = SettleRequest(action=SettleAction.CONFIRM, actor="user:~" + "0" * 64)
    with pytest.raises(Exception):  # noqa: B017 - rejected or never accepted; either way not applied
        await asyncio.wait_for(handle.execute_update(PendingWriteWorkflow.settle, forged, id="forged"), 10)
    record = await api.store.get_memory(t, memory_id)
    assert record is not None and record.status is Status.PENDING
    # The real owner still settles it through the API (the workflow is not wedged).
    confirmed = await http.post(f"/v1/memories/{memory_id}/confirm", headers=api.auth(t, "alice"))
    assert confirmed.status_code == 200, confirmed.text
    record = await api.store.get_memory(t, memory_id)
    assert record is not None and record.status is Status.ACTIVE
