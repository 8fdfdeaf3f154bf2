"""Record one real history per workflow case, for the replay test (`make record-histories`).

Runs every workflow in `workflows.registry.ALL_WORKFLOWS` on a throwaway Temporal dev server, with the real
worker (`worker.runtime`) over real embedded stores (SQLite file, Qdrant Edge, in-process cache),
and writes each history as JSON to `tests/workflows/histories/<WorkflowName>-<case>.json`.

Why: `test_replay.py` replays these with the current workflow code; a change that would break
running workflows (non-determinism) fails there instead of in production. Re-recording replaces only
the files at the top of `histories/`: a change to a long-lived workflow is first guarded by
`workflow.patched`, its old histories kept in a subdirectory, and its fingerprint accepted
(`fingerprints.py`, docs/decisions/workflow-versioning.md).

Payloads are sealed with `TEST_CODEC_KEY`, a fixed key published here, so the files decode the same
in every test run; it protects nothing and must never be used outside tests. Every text is synthetic.

This module also holds the small helpers the dev-server slice tests share (names without a `test`
prefix, so pytest does not collect them when imported).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import logging
import re
import sys
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowFailureError

from memwarden.config import Settings
from memwarden.extract.base import Message
from memwarden.forget import MemorySelector, SourceSelector, selector_key, subject_key
from memwarden.identity import Principal, Role, read_filter
from memwarden.keys import Purpose
from memwarden.policy.gate import GatePolicy
from memwarden.policy.imports import ImportInput
from memwarden.records import (
    Decision,
    ForgetInput,
    InvalidateInput,
    MemoryType,
    MessageRole,
    Provenance,
    RememberInput,
    RememberResult,
    RetrieveInput,
    RetrieveResult,
    RevalidateInput,
    RevalidateResult,
    RevalidationOutcome,
    RevertInput,
    RollbackInput,
    Scope,
    Sensitivity,
    SettleAction,
    SettleRequest,
    SourceChange,
    SourceEvent,
    SourceKind,
    SourceRef,
    content_hash,
)
from memwarden.remediation import MemoriesSelector
from memwarden.services.conversations import ConversationTarget, ImportedConversation, park_conversation
from memwarden.services.deps import Deps
from memwarden.stores.forget import ForgetStore
from memwarden.stores.remediation import RemediationStore
from memwarden.stores.sql import SqlStore
from memwarden.stores.sql.imports import CANDIDATE as CANDIDATE_LINE
from memwarden.stores.sql.imports import CONVERSATION as CONVERSATION_LINE
from memwarden.stores.sql.imports import ImportRow, ParkedLine
from memwarden.stores.summaries import park_summary_request
from memwarden.temporal.codec import ENCODING
from memwarden.temporal.converter import data_converter
from memwarden.temporal.names import pending_workflow_id, revalidate_workflow_id
from stack.devserver import DevServer, free_port
from tests.source_server import SourceServer, sources_toml
from tests.workflows.fingerprints import patch_ids
from worker.runtime import build_worker, open_deps
from workflows.imports import ImportWorkflow
from workflows.registry import (
    ALL_WORKFLOWS,
    ConversationWorkflow,
    ForgetWorkflow,
    HealthWorkflow,
    PendingWriteWorkflow,
    RememberWorkflow,
    RetentionWorkflow,
    RetrieveWorkflow,
    RevertWorkflow,
    RollbackWorkflow,
    SummarizeWorkflow,
)
from workflows.revalidate import (
    SOURCE_EVENT_SIGNAL,
    InvalidateWorkflow,
    PeriodicRevalidationWorkflow,
    RevalidateWorkflow,
)

HISTORIES_DIR = Path(__file__).resolve().parent / "histories"

_KEY_SEED = b"memwarden: public codec key for recorded test histories"
TEST_CODEC_KEY = base64.b64encode(hashlib.sha256(_KEY_SEED).digest()).decode()
"""A fixed, public AES-256 key (base64): recorded histories decode deterministically in tests."""

IDENTITY = "memwarden-record-histories"
"""Client and worker identity written into history instead of `pid@hostname`."""

CLAIM_CHECK_TTL = timedelta(hours=1)


def settings_for(data_dir: Path, address: str, task_queue: str, **overrides: object) -> Settings:
    """Embedded-profile settings for a test worker: stores under `data_dir`, the fixed test codec key."""
    values: dict[str, object] = {
        "data_dir": data_dir,
        "temporal_address": address,
        "temporal_namespace": "default",
        "temporal_task_queue": task_queue,
        "codec_key": TEST_CODEC_KEY,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


async def connect_client(settings: Settings, *, identity: str | None = None) -> Client:
    """A client with the project's encrypted data converter (the same one `memwarden.temporal.converter` builds)."""
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=data_converter(settings),
        identity=identity,
    )


def remember_input(
    memory_id: str,
    content: str,
    *,
    tenant: str,
    owner: str,
    actor: str,
    scope: Scope = Scope.USER,
    agent_id: str | None = None,
    type: MemoryType = MemoryType.PREFERENCE,
    slot: str | None = None,
) -> RememberInput:
    """The workflow input the API builds for a candidate: a claim-check ref, never the content."""
    return RememberInput(
        memory_id=memory_id,
        candidate_ref=memory_id,
        content_hash=content_hash(content),
        content_chars=len(content),
        tenant_id=tenant,
        owner_id=owner,
        scope=scope,
        agent_id=agent_id,
        store=None,
        type=type,
        slot=slot,
        source_kind=SourceKind.USER,
        source_ref=None,
        provenance=Provenance(session="s-1", writer=actor),
        reason="user_explicit_preference",
        importance=0.7,
        sensitivity=Sensitivity.LOW,
        ttl_seconds=None,
        actor=actor,
    )


async def park(store: SqlStore, request: RememberInput, content: str) -> None:
    """Put the content in the claim-check table, as the API does before it starts the workflow."""
    await store.put_candidate(request.candidate_ref, request.tenant_id, content, datetime.now(UTC) + CLAIM_CHECK_TTL)


async def run_remember(
    client: Client,
    store: SqlStore,
    task_queue: str,
    request: RememberInput,
    content: str,
    *,
    workflow_id: str,
    policy: GatePolicy | None = None,
) -> RememberResult:
    """Park the content and run RememberWorkflow to completion, under the gate's default policy."""
    await park(store, request, content)
    return await client.execute_workflow(
        RememberWorkflow.run, args=[request, policy or GatePolicy()], id=workflow_id, task_queue=task_queue
    )


async def run_retrieve(
    client: Client, task_queue: str, principal: Principal, query: str, *, workflow_id: str, k: int = 10
) -> RetrieveResult:
    """Run RetrieveWorkflow with the read filter the principal's verified token yields."""
    request = RetrieveInput(query=query, k=k, read_filter=read_filter(principal), actor=principal.actor)
    return await client.execute_workflow(RetrieveWorkflow.run, request, id=workflow_id, task_queue=task_queue)


LOCAL_ACTIVITY_MARKER_KEYS = frozenset(
    {
        "seq",
        "attempt",
        "activity_id",
        "activity_type",
        "complete_time",
        "backoff",
        "original_schedule_time",
        "activation_index",
    }
)
"""What the SDK itself writes, unencoded, into a local-activity marker: ids, type, attempt, times."""

_MARKER_METADATA_PATH = re.compile(r"/markerRecordedEventAttributes/details/data/payloads\[\d+\]$")
_PATCH_MARKER_PATH = re.compile(r"/markerRecordedEventAttributes/details/patch-data/payloads\[\d+\]$")
_CHANGE_VERSION_PATH = re.compile(r"/searchAttributes/indexedFields/TemporalChangeVersion$")
KNOWN_PATCHES = patch_ids()
"""`workflow.patched` writes, unencoded, a marker `{"id": <patch>, "deprecated": bool}` and a search
attribute listing the patch names: tolerated only for the patch ids our workflow code passes it."""


def _sdk_metadata(path: str, value: object) -> bool:
    """Whether an unencoded payload is the SDK's own bookkeeping (ids, types, times, patch names)."""
    if _MARKER_METADATA_PATH.search(path):
        return isinstance(value, dict) and set(value) <= LOCAL_ACTIVITY_MARKER_KEYS
    if _PATCH_MARKER_PATH.search(path):
        return isinstance(value, dict) and set(value) <= {"id", "deprecated"} and value.get("id") in KNOWN_PATCHES
    if _CHANGE_VERSION_PATH.search(path):
        return isinstance(value, list) and set(value) <= KNOWN_PATCHES
    return False


def unsealed_payloads(history: dict[str, Any]) -> list[str]:
    """Paths of every payload in a history (its JSON dict) that is not ciphertext under our codec.

    The one tolerated exception is the SDK's own local-activity marker metadata, and only while it
    holds nothing but `LOCAL_ACTIVITY_MARKER_KEYS`.
    """
    found: list[str] = []

    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            metadata = node.get("metadata")
            if isinstance(metadata, dict) and "encoding" in metadata:
                encoding = base64.b64decode(metadata["encoding"])
                raw = base64.b64decode(node.get("data", "")) if encoding != ENCODING else b""
                if encoding != ENCODING and not (raw and _sdk_metadata(path, json.loads(raw))):
                    found.append(path)
                return
            for key, value in node.items():
                walk(value, f"{path}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}[{i}]")

    walk(history, "")
    return found


# -- the recorded cases ----------------------------------------------------------------------

TENANT = "tenant-synthetic"
ALICE = Principal(tenant=TENANT, sub="user-a", role=Role.USER)
AGENT = Principal(tenant=TENANT, sub="svc-planner", role=Role.AGENT, agent="planner", on_behalf_of="user-a")

SYNTHETIC = {
    "pref": "synthetic preference: prefers the color teal for dashboard charts",
    "pref_new": "synthetic preference: prefers the color amber for dashboard charts",
    "agent": "synthetic episode: user-a met the planner for coffee on a tuesday",
    "secret": "synthetic deploy key AKIAZ7QXW3SYNTH5EXMP with secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYSYNTHETICKEY",
    "staged_ok": "synthetic directive: from now on always summarise plans in three bullet points",
    "staged_no": "synthetic directive: from now on never mention weekend plans in summaries",
    "staged_late": "synthetic directive: from now on always answer in formal register",
    "episode": "synthetic episode: user-a walked along the canal. It was windy.",
    "rv_same": "synthetic fact: user-r's evening class meets in room 12",
    "rv_old": "synthetic fact: user-r's glazing course starts on 2027-03-01",
    "rv_new": "synthetic fact: user-r's glazing course starts on 2027-04-15",
    "rv_flap": "synthetic fact: user-r's locker is number 31",
    "rv_event": "synthetic fact: user-r's studio pass is valid until june",
    "rv_event_new": "synthetic fact: user-r's studio pass is valid until july",
    "rv_task": "synthetic task: user-r's clay order is being packed",
    "rv_read": "synthetic fact: user-r's pottery wheel booking is on thursday",
    "poisoned": "synthetic fact: user-a's plan is the gold tier, says the crm record",
    "rb_good": "synthetic preference: prefers the window seat on trains",
    "rb_bad": "synthetic preference: prefers the aisle seat on trains",
}

POLICY = GatePolicy()
SHORT_WINDOW = GatePolicy(confirmation_window_seconds=2)
"""The window-passed case waits for real on the dev server; time skipping covers the 24 h default."""


def _mid(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"memwarden-test/{name}"))


@dataclass(frozen=True)
class Case:
    workflow: str
    case: str
    run: Callable[[Client, Deps, str, str], Awaitable[object]]
    fails: bool = False
    recorded_id: str | None = None
    """The id the run really has, when it is not `workflow_id` (a child started by another workflow)."""

    @property
    def workflow_id(self) -> str:
        return f"{self.workflow}-{self.case}"


def _remember(
    name: str,
    *,
    expect: Decision,
    text: str | None = None,
    actor: str = ALICE.actor,
    policy: GatePolicy = POLICY,
    **fields: Any,
) -> Callable[..., Any]:
    """Propose SYNTHETIC[text or name] as memory `name` and check the gate decided `expect`."""

    async def run(client: Client, deps: Deps, tq: str, wid: str) -> object:
        content = SYNTHETIC[text or name]
        request = remember_input(_mid(name), content, tenant=TENANT, owner=ALICE.sub, actor=actor, **fields)
        result = await run_remember(client, deps.store, tq, request, content, workflow_id=wid, policy=policy)
        if result.decision is not expect:
            raise RuntimeError(f"recording expected {expect} for {name}, got {result.decision}/{result.reason}")
        return result

    return run


def _settle(name: str, action: SettleAction | None) -> Callable[..., Any]:
    """Confirm or decline the staged write `name` (None: let its window pass), then wait for its end."""

    async def run(client: Client, deps: Deps, tq: str, wid: str) -> object:
        handle = client.get_workflow_handle(pending_workflow_id(_mid(name)), result_type=RememberResult)
        if action is not None:
            await handle.execute_update(
                PendingWriteWorkflow.settle, SettleRequest(action=action, actor=ALICE.actor), id=f"settle-{action}"
            )
        return await handle.result()

    return run


async def _remember_quarantined(client: Client, deps: Deps, tq: str, wid: str) -> object:
    """A source record forgotten as poisoned (the API's tombstone step quarantines it), then a candidate
    citing it: REJECT source_quarantined, on record with nothing looked up."""
    selector = SourceSelector(system="crm", key="rec-poisoned")
    body = selector.model_dump(mode="json")
    await ForgetStore(deps.store).begin(
        tenant_id=TENANT,
        requester="ops-1",
        selector=selector,
        redacted_selector=body,
        selector_key=selector_key(TENANT, body),
        reason="poisoning",
        subject_hash=None,
        now=datetime.now(UTC),
    )
    content = SYNTHETIC["poisoned"]
    request = remember_input(
        _mid("poisoned"), content, tenant=TENANT, owner=ALICE.sub, actor=ALICE.actor, type=MemoryType.FACT
    ).model_copy(update={"source_ref": SourceRef(system="crm", key="rec-poisoned"), "reason": "user_stated_fact"})
    result = await run_remember(client, deps.store, tq, request, content, workflow_id=wid)
    if (result.decision, result.reason) != (Decision.REJECT, "source_quarantined"):
        raise RuntimeError(f"recording expected REJECT source_quarantined, got {result.decision}/{result.reason}")
    return result


async def _retrieve_user(client: Client, deps: Deps, tq: str, wid: str) -> object:
    result = await run_retrieve(client, tq, ALICE, "which color for charts", workflow_id=wid)
    if not result.hits:
        raise RuntimeError("recording expected hits for the user case")
    return result


async def _retrieve_agent(client: Client, deps: Deps, tq: str, wid: str) -> object:
    result = await run_retrieve(client, tq, AGENT, "when are plans reviewed", workflow_id=wid)
    if len(result.hits) < 2:
        raise RuntimeError("recording expected the agent to see both memories")
    return result


async def _retrieve_fails(client: Client, deps: Deps, tq: str, wid: str) -> object:
    # k=0 is refused by the index (limit must be >= 1): the local activity fails on each of its
    # attempts and the workflow fails, so a failure path (with its encrypted message) is on record.
    try:
        await run_retrieve(client, tq, ALICE, "anything", workflow_id=wid, k=0)
    except WorkflowFailureError as exc:
        return exc
    raise RuntimeError("recording expected the k=0 retrieval to fail")


async def _health(client: Client, deps: Deps, tq: str, wid: str) -> object:
    healthy = await client.execute_workflow(HealthWorkflow.run, id=wid, task_queue=tq)
    if healthy is not True:
        raise RuntimeError("recording expected a healthy index")
    return healthy


_DIRECTIVE = {"type": MemoryType.PROCEDURAL}


async def _summarize(client: Client, deps: Deps, tq: str, wid: str) -> object:
    request = remember_input(
        str(uuid.uuid5(uuid.NAMESPACE_URL, "memwarden-test/episode")),
        SYNTHETIC["episode"],
        tenant=TENANT,
        owner=ALICE.sub,
        actor=ALICE.actor,
        type=MemoryType.EPISODIC,
    )
    await run_remember(client, deps.store, tq, request, SYNTHETIC["episode"], workflow_id=f"{wid}-source")
    # The owner travels by handle (a claim check), never as an id in history.
    key = subject_key(deps.settings.auth_secret_value)
    request = await park_summary_request(deps.store, key, tenant_id=TENANT, owner_id=ALICE.sub, actor=ALICE.actor)
    result = await client.execute_workflow(SummarizeWorkflow.run, request, id=wid, task_queue=tq)
    if result.summary_id is None:
        raise RuntimeError("recording expected a summary")
    return result


CONVERSATION = (
    (MessageRole.USER, "synthetic: I live in Tealtown and I love kite flying.", "c-u1"),
    (MessageRole.ASSISTANT, "synthetic: glad to hear it, how can I help?", "c-a1"),
    (MessageRole.USER, "synthetic: actually, I moved to Ambertown last month.", "c-u2"),
    (MessageRole.USER, "synthetic: for this ticket, keep the reply very short.", "c-u3"),
)


async def _conversation(client: Client, deps: Deps, tq: str, wid: str) -> object:
    """A conversation handed over: extraction, one RememberWorkflow child per candidate (a correction among
    them), no session consolidation (no episodes), the conversation released."""
    messages = [Message(role=role, content=text, turn_id=turn) for role, text, turn in CONVERSATION]
    target = ConversationTarget(
        tenant_id=TENANT,
        owner_id=ALICE.sub,
        scope=Scope.USER,
        agent_id=None,
        store=None,
        writer=ALICE.actor,
        actor=ALICE.actor,
    )
    request = await park_conversation(
        deps.store, deps.settings.key_for(Purpose.SUBJECT_HANDLES), target, "session-synthetic", messages
    )
    result = await client.execute_workflow(ConversationWorkflow.run, args=[request, POLICY], id=wid, task_queue=tq)
    got = [o.decision for o in result.outcomes]
    if got != [Decision.ADD, Decision.ADD, Decision.UPDATE, Decision.ADD]:
        raise RuntimeError(f"recording expected ADD, ADD, UPDATE, ADD from the conversation, got {got}")
    return result


async def _forget_memory(client: Client, deps: Deps, tq: str, wid: str) -> object:
    """The user's preference forgotten: the API's tombstone step, then the workflow under a fixed id."""
    memory_id = str(uuid.uuid5(uuid.NAMESPACE_URL, "memwarden-test/pref"))
    selector = MemorySelector(memory_id=memory_id)
    body = selector.model_dump(mode="json")
    row, _ = await ForgetStore(deps.store).begin(
        tenant_id=TENANT,
        requester=ALICE.actor,
        selector=selector,
        redacted_selector=body,
        selector_key=selector_key(TENANT, body),
        reason="owner_request",
        subject_hash=None,
        now=datetime.now(UTC),
    )
    return await client.execute_workflow(
        ForgetWorkflow.run, ForgetInput(deletion_id=row.id, tenant_id=TENANT), id=wid, task_queue=tq
    )


async def _revert(client: Client, deps: Deps, tq: str, wid: str) -> object:
    """The amber preference reverted: the teal value it superseded is live again, as a new version."""
    request = RevertInput(tenant_id=TENANT, memory_id=_mid("pref_new"), actor=ALICE.actor)
    result = await client.execute_workflow(RevertWorkflow.run, request, id=wid, task_queue=tq)
    if result.outcome != "reverted":
        raise RuntimeError(f"recording expected a revert, got {result.outcome}")
    return result


async def _rollback(client: Client, deps: Deps, tq: str, wid: str) -> object:
    """A write that superseded the window-seat preference, rolled back: the API's quarantine step, then the
    workflow (restore, every sink, the receipt) under a fixed id."""
    for name in ("rb_good", "rb_bad"):
        content = SYNTHETIC[name]
        request = remember_input(_mid(name), content, tenant=TENANT, owner=ALICE.sub, actor=AGENT.actor, slot="seat")
        await run_remember(client, deps.store, tq, request, content, workflow_id=f"{wid}-{name}")
    selector = MemoriesSelector(memory_ids=[_mid("rb_bad")])
    row, _ = await RemediationStore(deps.store).quarantine(
        tenant_id=TENANT,
        requester="operator:ops",
        selector=selector,
        redacted=selector.model_dump(mode="json"),
        reason="poisoned_agent",
        store=None,
        now=datetime.now(UTC),
    )
    return await client.execute_workflow(
        RollbackWorkflow.run, RollbackInput(rollback_id=row.id, tenant_id=TENANT), id=wid, task_queue=tq
    )


async def _retention(client: Client, deps: Deps, tq: str, wid: str) -> object:
    """An expiring task memory, swept once its TTL passed: RetentionWorkflow and its child ForgetWorkflow."""
    content = "synthetic task: user-a's parcel is due on friday"
    request = remember_input(
        str(uuid.uuid5(uuid.NAMESPACE_URL, "memwarden-test/expiring")),
        content,
        tenant=TENANT,
        owner=ALICE.sub,
        actor=ALICE.actor,
        type=MemoryType.TASK,
    ).model_copy(update={"ttl_seconds": 1})
    await run_remember(client, deps.store, tq, request, content, workflow_id=f"{wid}-source")
    await asyncio.sleep(1.2)
    swept = await client.execute_workflow(RetentionWorkflow.run, id=wid, task_queue=tq)
    if swept != 1:
        raise RuntimeError("recording expected one tenant's expired memories to be swept")
    return swept


# -- Revalidate: a real HTTP source server run by the recording (tests/source_server.py) ---------

USER_R = Principal(tenant=TENANT, sub="user-r", role=Role.USER)
RECORDS = "records"
"""The recording's system of record (sources.toml in the stores' data dir points at `Recording.source`)."""


class Recording:
    """The source server the Revalidate cases steer; set by `record()`."""

    source: Any = None


async def _remember_sourced(client: Client, deps: Deps, tq: str, name: str, key: str) -> str:
    content = SYNTHETIC[name]
    request = remember_input(
        _mid(name), content, tenant=TENANT, owner=USER_R.sub, actor=USER_R.actor, type=MemoryType.FACT
    ).model_copy(update={"source_ref": SourceRef(system=RECORDS, key=key, version="v1"), "reason": "user_stated_fact"})
    result = await run_remember(client, deps.store, tq, request, content, workflow_id=f"remember-{name}")
    if result.decision is not Decision.ADD or result.memory_id is None:
        raise RuntimeError(f"recording expected ADD for {name}, got {result.decision}/{result.reason}")
    return result.memory_id


def _revalidate(
    name: str, key: str, *, value: str, mode: str = "up", expect: RevalidationOutcome
) -> Callable[..., Any]:
    """Remember SYNTHETIC[name] citing `key`, let the source hold SYNTHETIC[value] (v1 when unchanged), revalidate."""

    async def run(client: Client, deps: Deps, tq: str, wid: str) -> object:
        Recording.source.put(key, SYNTHETIC[value], "v1" if value == name else "v2")
        memory_id = await _remember_sourced(client, deps, tq, name, key)
        Recording.source.set(mode=mode)
        try:
            result = await client.execute_workflow(
                RevalidateWorkflow.run,
                RevalidateInput(
                    tenant_id=TENANT, memory_id=memory_id, trigger="record", max_attempts=3, retry_seconds=0.2
                ),
                id=wid,
                task_queue=tq,
                result_type=RevalidateResult,
            )
        finally:
            Recording.source.set(mode="up")
        if result.outcome is not expect:
            raise RuntimeError(f"recording expected {expect} for {name}, got {result.outcome}/{result.reason}")
        return result

    return run


async def _invalidate(client: Client, deps: Deps, tq: str, wid: str) -> object:
    """A change event for one record, as POST /v1/events handles it: mark stale, then signal-with-start."""
    from memwarden.stores.audit import AuditEventIn
    from memwarden.stores.revalidation import RevalidationStore

    Recording.source.put("pass-1", SYNTHETIC["rv_event"], "v1")
    await _remember_sourced(client, deps, tq, "rv_event", "pass-1")
    Recording.source.put("pass-1", SYNTHETIC["rv_event_new"], "v2")
    now = datetime.now(UTC)
    moved = await RevalidationStore(deps.store).mark_for_event(
        TENANT,
        RECORDS,
        "pass-1",
        SourceChange.CHANGED,
        now,
        lambda r: AuditEventIn(
            tenant_id=TENANT, actor="system:records", operation="revalidate", memory_id=r.id, reason="source_changed"
        ),
    )
    handle = await client.start_workflow(
        InvalidateWorkflow.run,
        args=[InvalidateInput(tenant_id=TENANT, system=RECORDS, key_hash="0" * 64), 0.2, 0.5, 3],
        id=wid,
        task_queue=tq,
        start_signal=SOURCE_EVENT_SIGNAL,
        start_signal_args=[SourceEvent(event_id="e-1", change=SourceChange.CHANGED, version="v2", memory_ids=moved)],
    )
    result = await handle.result()
    if result.revalidated != 1:
        raise RuntimeError(f"recording expected one revalidation, got {result}")
    return result


async def _periodic(client: Client, deps: Deps, tq: str, wid: str) -> object:
    """A task citing a source, confirmed long ago: the periodic sweep re-checks it."""
    import sqlalchemy as sa

    from memwarden.stores.sql_models import memories

    Recording.source.put("order-1", SYNTHETIC["rv_task"], "v1")
    content = SYNTHETIC["rv_task"]
    request = remember_input(
        _mid("rv_task"), content, tenant=TENANT, owner=USER_R.sub, actor=USER_R.actor, type=MemoryType.TASK
    ).model_copy(
        update={"source_ref": SourceRef(system=RECORDS, key="order-1", version="v1"), "reason": "task_outcome"}
    )
    await run_remember(client, deps.store, tq, request, content, workflow_id="remember-rv_task")
    async with deps.store.transaction() as conn:  # confirmed a day ago: due for the sweep
        await conn.execute(
            sa.update(memories)
            .where(memories.c.id == _mid("rv_task"))
            .values(last_confirmed_at=datetime.now(UTC) - timedelta(days=1))
        )
    checked = await client.execute_workflow(PeriodicRevalidationWorkflow.run, id=wid, task_queue=tq)
    if checked < 1:
        raise RuntimeError("recording expected the sweep to re-check the task")
    return checked


async def _retrieve_deadline(client: Client, deps: Deps, tq: str, wid: str) -> object:
    """The source hangs past its timeout: the read answers, and a background RevalidateWorkflow is started."""
    Recording.source.put("wheel-1", SYNTHETIC["rv_read"], "v1")
    memory_id = await _remember_sourced(client, deps, tq, "rv_read", "wheel-1")
    Recording.source.set(delay=1.0)
    try:
        request = RetrieveInput(query="pottery wheel booking", k=1, read_filter=read_filter(USER_R), actor=USER_R.actor)
        result = await client.execute_workflow(
            RetrieveWorkflow.run, request, id=wid, task_queue=tq, result_type=RetrieveResult
        )
    finally:
        Recording.source.set(delay=0.0)
    if [b.memory_id for b in result.background] != [memory_id]:
        raise RuntimeError(f"recording expected a background revalidation, got {result.background}")
    await client.get_workflow_handle(revalidate_workflow_id(memory_id)).result()  # it outlived the read
    return result


def _fact_line(import_id: str, n: int, text: str) -> ParkedLine:
    """A candidate line of USER_R's as the API parks it: the admitted input and the content."""
    c = remember_input(
        str(uuid.uuid5(uuid.NAMESPACE_URL, f"{import_id}-{n}")),
        text,
        tenant=TENANT,
        owner=USER_R.sub,
        actor=USER_R.actor,
        type=MemoryType.FACT,
    ).model_copy(update={"reason": "user_stated_fact", "importance": 0.8})
    return ParkedLine(n, CANDIDATE_LINE, json.dumps({"input": c.model_dump(mode="json"), "content": text}))


async def _run_import(client: Client, deps: Deps, tq: str, wid: str, import_id: str, lines: list[ParkedLine]) -> object:
    """The import created and its lines parked as the API does, then ImportWorkflow run in batches of two;
    returns its counts."""
    now = datetime.now(UTC)
    digest = hashlib.sha256(import_id.encode()).hexdigest()
    total = len(lines)
    await deps.store.create_import(
        ImportRow(import_id, TENANT, "actor-hash", digest, total, "running", wid, now, now, None)
    )
    await deps.store.park_import_lines(import_id, TENANT, sorted(lines, key=lambda p: p.line_no), [], now)
    result = await client.execute_workflow(
        ImportWorkflow.run,
        ImportInput(import_id=import_id, tenant_id=TENANT, total_lines=total, batch_size=2),
        id=wid,
        task_queue=tq,
    )
    return result.counts


async def _import(client: Client, deps: Deps, tq: str, wid: str) -> object:
    """A three-line import parked as the API parks it (two facts, one secret), decided in two batches."""
    texts = [
        "The spare bike pump hangs in the garage",
        "The garden shears live in the shed",
        "the deploy key is AKIAZ7QXW3SYNTH5EXMP",
    ]
    lines = [_fact_line("import-record", n, text) for n, text in enumerate(texts, start=1)]
    counts = await _run_import(client, deps, tq, wid, "import-record", lines)
    if counts != {"ADD": 2, "REJECT": 1}:
        raise RuntimeError(f"recording expected two ADDs and a REJECT, got {counts}")
    return counts


IMPORTED_CONVERSATION = "synthetic: I live in Coppertown."


async def _import_conversation(client: Client, deps: Deps, tq: str, wid: str) -> object:
    """A candidate line, a conversation line and another candidate, parked as the API parks them: the
    conversation runs as a ConversationWorkflow child (its one candidate a RememberWorkflow grandchild), then
    its line's outcome is recorded; three batches and the last, empty one."""
    import_id = "import-record-conversation"
    conversation = ImportedConversation(
        session_id="session-import",
        received_at=datetime.now(UTC),
        messages=[Message(role=MessageRole.USER, content=IMPORTED_CONVERSATION, turn_id="i-u1")],
        kept=[0],
        withheld={},
        target=ConversationTarget(TENANT, USER_R.sub, Scope.USER, None, None, USER_R.actor, USER_R.actor),
    )
    lines = [
        _fact_line(import_id, 1, "The tide table is pinned by the boathouse door"),
        ParkedLine(2, CONVERSATION_LINE, conversation.model_dump_json()),
        _fact_line(import_id, 3, "The spare paddles are in the loft"),
    ]
    counts = await _run_import(client, deps, tq, wid, import_id, lines)
    if counts != {"ADD": 3}:
        raise RuntimeError(f"recording expected three ADDs (one from the conversation), got {counts}")
    return counts


CASES: tuple[Case, ...] = (
    Case("RememberWorkflow", "gated_add", _remember("pref", expect=Decision.ADD, slot="ui.chart_color")),
    Case(
        "RememberWorkflow",
        "agent_private",
        _remember(
            "agent",
            expect=Decision.ADD,
            actor=AGENT.actor,
            scope=Scope.AGENT,
            agent_id=AGENT.agent,
            type=MemoryType.EPISODIC,
        ),
    ),
    Case("RememberWorkflow", "noop_duplicate", _remember("pref_dup", text="pref", expect=Decision.NOOP)),
    Case("RememberWorkflow", "rejected_secret", _remember("secret", expect=Decision.REJECT, type=MemoryType.FACT)),
    Case("RememberWorkflow", "rejected_quarantined", _remember_quarantined),
    Case("RememberWorkflow", "staged", _remember("staged_ok", expect=Decision.PENDING, **_DIRECTIVE)),
    Case("PendingWriteWorkflow", "confirmed", _settle("staged_ok", SettleAction.CONFIRM), recorded_id="staged_ok"),
    Case("RememberWorkflow", "staged_declined", _remember("staged_no", expect=Decision.PENDING, **_DIRECTIVE)),
    Case("PendingWriteWorkflow", "declined", _settle("staged_no", SettleAction.DECLINE), recorded_id="staged_no"),
    Case(
        "RememberWorkflow",
        "staged_expires",
        _remember("staged_late", expect=Decision.PENDING, policy=SHORT_WINDOW, **_DIRECTIVE),
    ),
    Case("PendingWriteWorkflow", "window_passed", _settle("staged_late", None), recorded_id="staged_late"),
    Case("RetrieveWorkflow", "user_hits", _retrieve_user),
    Case("RetrieveWorkflow", "agent_hits", _retrieve_agent),
    Case("RetrieveWorkflow", "activity_fails", _retrieve_fails, fails=True),
    Case("HealthWorkflow", "ok", _health),
    # Last: supersedes the teal preference, after the reads that expect it.
    Case("RememberWorkflow", "gated_update", _remember("pref_new", expect=Decision.UPDATE, slot="ui.chart_color")),
    Case("RevertWorkflow", "revert", _revert),
    Case("RollbackWorkflow", "one_write", _rollback),
    # Forget and retention after every case that reads or supersedes the preference.
    Case("SummarizeWorkflow", "episodes", _summarize),
    Case("ForgetWorkflow", "one_memory", _forget_memory),
    Case("RetentionWorkflow", "one_expired", _retention),
    Case(
        "RevalidateWorkflow",
        "unchanged",
        _revalidate("rv_same", "room-1", value="rv_same", expect=RevalidationOutcome.UNCHANGED),
    ),
    Case(
        "RevalidateWorkflow",
        "changed",
        _revalidate("rv_old", "course-1", value="rv_new", expect=RevalidationOutcome.CHANGED),
    ),
    Case(
        "RevalidateWorkflow",
        "unavailable_then_unchanged",
        _revalidate("rv_flap", "locker-1", value="rv_flap", mode="flap", expect=RevalidationOutcome.UNCHANGED),
    ),
    Case("InvalidateWorkflow", "one_event", _invalidate),
    Case("PeriodicRevalidationWorkflow", "sweep", _periodic),
    Case("RetrieveWorkflow", "read_deadline", _retrieve_deadline),
    Case("ConversationWorkflow", "extracted", _conversation),
    Case("ImportWorkflow", "two_batches", _import),
    Case("ImportWorkflow", "conversation_line", _import_conversation),
)


def history_id(case: Case) -> str:
    """Where the case's history lives on the server (a staged write's child has an id of its own)."""
    return pending_workflow_id(_mid(case.recorded_id)) if case.recorded_id else case.workflow_id


def workflow_names() -> set[str]:
    """The registered names of every workflow the worker runs."""
    return {wf.__temporal_workflow_definition.name for wf in ALL_WORKFLOWS}  # type: ignore[attr-defined]


def selected(prefixes: list[str]) -> tuple[Case, ...]:
    """The cases whose id (`<Workflow>-<case>`) starts with one of `prefixes`; every case when none is given."""
    if not prefixes:
        return CASES
    chosen = tuple(c for c in CASES if c.workflow_id.startswith(tuple(prefixes)))
    if not chosen:
        raise SystemExit(f"no case matches {prefixes}")
    return chosen


async def record(cases: tuple[Case, ...] = CASES) -> dict[str, str]:
    """Run the cases (every one by default) on a fresh dev server; returns each history's JSON by file stem
    (`<Workflow>-<case>`)."""
    missing = workflow_names() - {c.workflow for c in CASES}
    if missing:
        raise SystemExit(f"no recorded case for workflows: {sorted(missing)}")
    with tempfile.TemporaryDirectory(prefix="memwarden-record-") as tmp:
        data_dir = Path(tmp)
        server = DevServer(data_dir / "temporal", port=free_port(), headless=True)
        source = SourceServer()
        Recording.source = source
        (data_dir / "stores").mkdir()
        (data_dir / "stores" / "sources.toml").write_text(
            sources_toml(RECORDS, source.url, timeout_ms=300, freshness_seconds=0)
        )
        with source:
            async with server:
                settings = settings_for(data_dir / "stores", server.address, "record-histories")
                client = await connect_client(settings, identity=IDENTITY)
                async with open_deps(settings) as deps, build_worker(client, deps):
                    for case in cases:
                        await case.run(client, deps, settings.temporal_task_queue, case.workflow_id)
                return {
                    c.workflow_id: (await client.get_workflow_handle(history_id(c)).fetch_history()).to_json()
                    for c in cases
                }


def write_histories(
    histories: dict[str, str], out_dir: Path = HISTORIES_DIR, *, replace_all: bool = True
) -> list[Path]:
    """Replace the directory's histories with these (a renamed case leaves no stale file behind), or with
    `replace_all` off, only the files of these cases."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in out_dir.glob("*.json") if replace_all else ():
        stale.unlink()
    written = []
    for stem, text in sorted(histories.items()):
        path = out_dir / f"{stem}.json"
        path.write_text(text + "\n")
        written.append(path)
    return written


def main(argv: list[str] | None = None) -> None:
    """`python -m tests.workflows.record_histories [PREFIX ...]`: every case, or only those whose id starts
    with a prefix (`ImportWorkflow`, `RememberWorkflow-staged`), leaving the other files as they are. A
    case that depends on an earlier one (a staged write's settlement) needs that one selected too."""
    prefixes = sys.argv[1:] if argv is None else argv
    # The activity_fails case fails on purpose; its three tracebacks would only be noise here.
    logging.getLogger("temporalio.activity").setLevel(logging.ERROR)
    histories = asyncio.run(record(selected(prefixes)))
    for path in write_histories(histories, replace_all=not prefixes):
        print(path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path)


if __name__ == "__main__":
    sys.exit(main())
