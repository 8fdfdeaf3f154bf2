"""Forget's telemetry over real HTTP: the `delete_memory` span tree, and the deletion completion time.

The embedded stack (Temporal dev server, production worker, API under uvicorn) with telemetry set up
first on the SDK's in-memory span exporter (the SDK's own test exporter, the only stand-in), so the
spans that the real Temporal tracing interceptor produces can be inspected. The owner id and the
memory texts are unique, so a leak of either into any span would be found.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from datetime import datetime

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from activities.forget import ForgetActivities
from memwarden import telemetry
from memwarden.records import ForgetInput
from memwarden.temporal.names import FORGET_FINISH, FORGET_PLAN, FORGET_PURGE, FORGET_VERIFY
from tests.forget_support import Stack, embedded_stack, seed, tenant, wait_verified
from worker.health import HealthServer

DELETION_METRIC = "memwarden_deletion_duration_seconds"


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory, spans: InMemorySpanExporter) -> AsyncIterator[Stack]:
    # Before the Temporal client exists: its TracingInterceptor takes the tracer current at connect time.
    telemetry.setup(span_exporter=spans)
    async with embedded_stack(tmp_path_factory.mktemp("forget-telemetry")) as s:
        yield s


@pytest.fixture
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30.0) as client:
        yield client


def ancestors(span: ReadableSpan, index: dict[int, ReadableSpan]) -> list[str]:
    names = []
    parent = span.parent
    while parent is not None and parent.span_id in index:
        node = index[parent.span_id]
        names.append(node.name)
        parent = node.parent
    return names


async def trace_of(spans: InMemorySpanExporter, deletion_id: str, *, within: float = 30.0) -> list[ReadableSpan]:
    """Every finished span of the trace whose `delete_memory` span names this deletion, once it is complete."""
    deadline = time.monotonic() + within
    while True:
        finished = list(spans.get_finished_spans())
        roots = [
            s for s in finished if s.name == "delete_memory" and s.attributes.get(telemetry.DELETION_ID) == deletion_id
        ]
        trace = [s for s in finished if roots and s.context.trace_id == roots[0].context.trace_id]
        if any(s.name == f"RunActivity:{FORGET_FINISH}" for s in trace):
            return trace
        assert time.monotonic() < deadline, f"no complete trace for {deletion_id}: {[s.name for s in trace]}"
        await asyncio.sleep(0.1)


def leaks(span: ReadableSpan, needles: list[str]) -> list[str]:
    """Every place in a span where one of the needles shows up."""
    texts = [span.name, span.status.description or ""]
    texts += [f"{k}={v}" for k, v in (span.attributes or {}).items()]
    for event in span.events:
        texts += [event.name, *(f"{k}={v}" for k, v in (event.attributes or {}).items())]
    return [t for t in texts if any(n in t for n in needles)]


async def test_delete_memory_span_links_the_api_to_forget_workflow_and_its_activities(
    stack: Stack, http: httpx.AsyncClient, spans: InMemorySpanExporter
) -> None:
    t = tenant()
    owner = f"wilhelmina{uuid.uuid4().hex[:10]}"
    text = f"{owner} hides the spare key under the blue {uuid.uuid4().hex[:8]} flowerpot"
    doomed = await seed(stack.deps, t, owner, text, replicate=False)
    answer = await http.delete(f"/v1/memories/{doomed.id}", headers=stack.auth(t, owner))
    assert answer.status_code == 202, answer.text
    accepted = answer.json()
    await wait_verified(http, accepted["deletion_id"], stack.auth(t, owner))

    trace = await trace_of(spans, accepted["deletion_id"])
    index = {s.context.span_id: s for s in trace}
    [root] = [s for s in trace if s.name == "delete_memory"]
    assert root.parent is None or root.parent.span_id not in index
    assert dict(root.attributes or {}) == {
        "gen_ai.operation.name": "delete_memory",
        "gen_ai.provider.name": "memwarden",
        "memwarden.tenant": t,
        "memwarden.principal.role": "user",
        "memwarden.selector.kind": "memory",
        "gen_ai.memory.record.id": doomed.id,
        "gen_ai.memory.record.count": 1,
        "memwarden.outcome": "tombstoned",
        "memwarden.deletion.id": accepted["deletion_id"],
        "memwarden.workflow.id": accepted["workflow_id"],
    }
    [run_workflow] = [s for s in trace if s.name == "RunWorkflow:ForgetWorkflow"]
    assert ancestors(run_workflow, index) == ["StartWorkflow:ForgetWorkflow", "delete_memory"]
    ran = {s.name.split(":", 1)[1] for s in trace if s.name.startswith("RunActivity:")}
    assert ran == {FORGET_PLAN, FORGET_PURGE, FORGET_VERIFY, FORGET_FINISH}
    for run_activity in (s for s in trace if s.name.startswith("RunActivity:")):
        name = run_activity.name.split(":", 1)[1]
        chain = ancestors(run_activity, index)
        assert chain == [f"StartActivity:{name}", "StartWorkflow:ForgetWorkflow", "delete_memory"], chain
    # No span of the trace holds the memory's text or the person's id (Temporal's own included).
    found = {s.name: leaks(s, [owner, text]) for s in trace if leaks(s, [owner, text])}
    assert not found, found


async def test_owner_erasure_span_names_the_selector_kind_and_counts_never_the_person(
    stack: Stack, http: httpx.AsyncClient, spans: InMemorySpanExporter
) -> None:
    t = tenant()
    owner = f"bartholomew{uuid.uuid4().hex[:10]}"
    texts = [f"{owner} takes the {i} o'clock ferry {uuid.uuid4().hex[:8]}" for i in range(3)]
    for text in texts:
        await seed(stack.deps, t, owner, text, replicate=False)
    privacy = stack.auth(t, "dpo", role="privacy")
    answer = await http.post(
        "/v1/forget", json={"selector": {"kind": "owner", "owner_id": owner}, "reason": "gdpr_art17"}, headers=privacy
    )
    assert answer.status_code == 202, answer.text
    deletion_id = answer.json()["deletion_id"]
    await wait_verified(http, deletion_id, privacy)
    trace = await trace_of(spans, deletion_id)
    [root] = [s for s in trace if s.name == "delete_memory"]
    attrs = dict(root.attributes or {})
    assert attrs["memwarden.selector.kind"] == "owner" and attrs["gen_ai.memory.record.count"] == 3
    assert attrs["memwarden.principal.role"] == "privacy" and "gen_ai.memory.record.id" not in attrs
    assert set(attrs) <= telemetry.ALLOWED_ATTRIBUTES
    found = {s.name: leaks(s, [owner, *texts]) for s in trace if leaks(s, [owner, *texts])}
    assert not found, found

    # A refused erasure: the span is marked with the problem's code, and the person is still absent.
    stranger = stack.auth(t, "mallory")
    refused = await http.post(
        "/v1/forget", json={"selector": {"kind": "owner", "owner_id": owner}, "reason": "x"}, headers=stranger
    )
    assert refused.status_code == 403
    [denied] = [
        s
        for s in spans.get_finished_spans()
        if s.name == "delete_memory" and s.attributes.get("memwarden.tenant") == t and s.attributes.get("error.type")
    ]
    assert denied.attributes["error.type"] == "owner_mismatch" and denied.status.status_code.name == "ERROR"
    assert not leaks(denied, [owner])


async def metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith((name + "{", name + " ")) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


async def test_deletion_completion_time_is_recorded_once_and_exported(stack: Stack, http: httpx.AsyncClient) -> None:
    t = tenant()
    health = HealthServer(stack.client, stack.deps, host="127.0.0.1", port=0)
    await health.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{health.port}", timeout=10) as worker_http:

            async def both(name: str, **labels: str) -> tuple[float, float]:
                api = (await http.get("/metrics")).text
                worker = await worker_http.get("/metrics")
                assert worker.status_code == 200 and worker.headers["content-type"].startswith("text/plain")
                return await metric(api, name, **labels), await metric(worker.text, name, **labels)

            count, total = f"{DELETION_METRIC}_count", f"{DELETION_METRIC}_sum"
            labels = {"status": "verified", "scope": "memory"}
            before, before_sum = await both(count, **labels), await both(total, **labels)
            doomed = await seed(stack.deps, t, "alice", "alice's bike lock code is taped under the seat")
            answer = await http.delete(f"/v1/memories/{doomed.id}", headers=stack.auth(t, "alice"))
            receipt = await wait_verified(http, answer.json()["deletion_id"], stack.auth(t, "alice"))
            # The API and the worker share this process here; `memwarden worker` alone serves it on its port.
            assert await both(count, **labels) == (before[0] + 1, before[1] + 1)
            # What it measured: the request (the tombstone) to the verified receipt, as the receipt says.
            took = (
                datetime.fromisoformat(receipt["completed_at"]) - datetime.fromisoformat(receipt["created_at"])
            ).total_seconds()
            after_sum = await both(total, **labels)
            assert took > 0 and abs(after_sum[0] - before_sum[0] - took) < 1e-3 and after_sum[0] == after_sum[1]

            # A retried finish (the activity ran again after a crash) does not count the deletion twice.
            again = await ForgetActivities(stack.deps).forget_finish(
                ForgetInput(deletion_id=receipt["deletion_id"], tenant_id=t)
            )
            assert again.receipt_hash == receipt["receipt_hash"]
            assert await both(count, **labels) == (before[0] + 1, before[1] + 1)
            exported = (await http.get("/metrics")).text
            assert "alice" not in exported and doomed.id not in exported and t not in exported
    finally:
        await health.stop()
