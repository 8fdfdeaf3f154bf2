"""Replay recorded histories against today's workflow code: non-determinism fails here, not in production.

The histories in `histories/` were recorded by `record_histories.py` (`make record-histories`) on a
real dev server with real activities, sealed with the fixed test codec key. Replaying needs that
codec (every input, local-activity result and failure is ciphertext) and the worker's sandbox.
"""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHistory
from temporalio.common import RetryPolicy
from temporalio.worker import Replayer

# This module defines workflows, so the sandbox re-imports it; everything beyond the standard library,
# pytest and temporalio passes through (cryptography, for one, cannot be imported twice).
with workflow.unsafe.imports_passed_through():
    from memwarden.policy.gate import GatePolicy, Remembered
    from memwarden.records import RememberInput, RememberResult, SummarizeInput
    from memwarden.temporal.converter import data_converter
    from memwarden.temporal.names import REMEMBER_CANDIDATE
    from memwarden.temporal.sandbox import SANDBOX
    from tests.workflows.record_histories import (
        CASES,
        HISTORIES_DIR,
        SYNTHETIC,
        Case,
        settings_for,
        unsealed_payloads,
        workflow_names,
    )
    from workflows.registry import ALL_WORKFLOWS

CURRENT_FILES = sorted(HISTORIES_DIR.glob("*.json"))
"""One history per case, recorded by today's code."""
HISTORY_FILES = sorted(HISTORIES_DIR.rglob("*.json"))
"""Today's cases, and any history kept below `histories/` for the old branch of a `workflow.patched`
change while runs of that branch may still be in flight (docs/decisions/workflow-versioning.md)."""


def load(path: Path) -> WorkflowHistory:
    """The file's stem is the workflow id it was recorded under (`<WorkflowName>-<case>`)."""
    return WorkflowHistory.from_json(path.stem, path.read_text())


def replayer(workflows: list[type]) -> Replayer:
    """Configured as the worker is: same data converter and codec key, same sandbox."""
    settings = settings_for(Path("/nonexistent"), "127.0.0.1:0", "replay")
    return Replayer(workflows=workflows, data_converter=data_converter(settings), workflow_runner=SANDBOX)


def test_every_workflow_and_case_has_a_recorded_history() -> None:
    recorded = {p.stem for p in CURRENT_FILES}
    assert recorded == {c.workflow_id for c in CASES}, "re-run `make record-histories`"
    assert {stem.split("-", 1)[0] for stem in recorded} == workflow_names()


@pytest.mark.parametrize("case", CASES, ids=[c.workflow_id for c in CASES])
def test_each_history_ends_as_its_case_did(case: Case) -> None:
    """The failure path is on record too, so replay covers a failed local activity and its encoded failure."""
    last = load(HISTORIES_DIR / f"{case.workflow_id}.json").events[-1]
    expected = (
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED
        if case.fails
        else EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    )
    assert last.event_type == expected


@pytest.mark.parametrize("path", HISTORY_FILES, ids=[p.stem for p in HISTORY_FILES])
async def test_replay_is_deterministic(path: Path) -> None:
    history = load(path)
    assert history.events[0].workflow_execution_started_event_attributes.workflow_type.name == path.stem.split("-")[0]
    result = await replayer(list(ALL_WORKFLOWS)).replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None, (
        f"{path.name} no longer replays on today's code: runs like it that are in flight would fail the same way. "
        "Guard the change with `workflow.patched(...)` rather than re-recording over it "
        f"(docs/decisions/workflow-versioning.md). {result.replay_failure}"
    )


async def test_all_histories_replay_in_one_batch() -> None:
    async def histories():  # type: ignore[no-untyped-def]
        for path in HISTORY_FILES:
            yield load(path)

    results = await replayer(list(ALL_WORKFLOWS)).replay_workflows(histories(), raise_on_replay_failure=False)
    assert results.replay_failures == {}


def test_recorded_histories_hold_no_plaintext() -> None:
    """Only ciphertext, apart from the SDK's own local-activity marker metadata (ids, type, times)."""
    for path in HISTORY_FILES:
        raw = path.read_text()
        for text in SYNTHETIC.values():
            assert text not in raw
        assert unsealed_payloads(json.loads(raw)) == [], path.name


# -- proof that the replay test can fail --------------------------------------------------------

REMEMBER_HISTORY = HISTORIES_DIR / "RememberWorkflow-gated_add.json"
"""An accepted write: the altered workflows below are changes to its command sequence."""


def test_current_remember_histories_take_one_local_activity() -> None:
    """Every Remember case is one local-activity marker (the whole gate) before the result."""
    for path in CURRENT_FILES:
        if path.stem.startswith("RememberWorkflow-"):
            markers = [e for e in load(path).events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
            names = [m.marker_recorded_event_attributes.marker_name for m in markers]
            assert names.count("core_local_activity") == 1, (path.name, names)


async def _gate(candidate: RememberInput, policy: GatePolicy | None, activity: str = REMEMBER_CANDIDATE) -> Remembered:
    return await workflow.execute_local_activity(
        activity,
        args=[candidate, policy or GatePolicy()],
        result_type=Remembered,
        start_to_close_timeout=timedelta(seconds=10),
        retry_policy=RetryPolicy(maximum_attempts=3),
    )


@workflow.defn(name="RememberWorkflow")
class RememberWorkflowWithAddedTimer:
    """RememberWorkflow as someone might 'harmlessly' change it: a short pause before the gate."""

    @workflow.run
    async def run(self, candidate: RememberInput, policy: GatePolicy | None = None) -> RememberResult:
        await workflow.sleep(timedelta(seconds=1))
        return (await _gate(candidate, policy)).result


@workflow.defn(name="RememberWorkflow")
class RememberWorkflowWithRenamedActivity:
    """RememberWorkflow calling its gate step by another activity name."""

    @workflow.run
    async def run(self, candidate: RememberInput, policy: GatePolicy | None = None) -> RememberResult:
        return (await _gate(candidate, policy, "remember_candidate_v2")).result


@pytest.mark.parametrize("altered", [RememberWorkflowWithAddedTimer, RememberWorkflowWithRenamedActivity])
async def test_replay_detects_a_nondeterministic_change(altered: type) -> None:
    history = load(REMEMBER_HISTORY)
    with pytest.raises(workflow.NondeterminismError):
        await replayer([altered]).replay_workflow(history)
    # The same history and replayer settings pass with the real workflow: the failure is the change's.
    assert (await replayer(list(ALL_WORKFLOWS)).replay_workflow(history)).replay_failure is None


async def test_replay_needs_the_codec_key() -> None:
    """Sealed payloads do not decode under another key: the histories really are ciphertext."""
    other = settings_for(Path("/nonexistent"), "127.0.0.1:0", "replay", codec_key=base64.b64encode(b"k" * 32).decode())
    wrong = Replayer(workflows=list(ALL_WORKFLOWS), data_converter=data_converter(other), workflow_runner=SANDBOX)
    result = await wrong.replay_workflow(load(REMEMBER_HISTORY), raise_on_replay_failure=False)
    assert result.replay_failure is not None
    assert "CodecError" in str(result.replay_failure)


async def test_summarize_history_carries_a_handle_not_the_owner() -> None:
    """The input names the owner by claim-check handle: decoded (codec key), it holds no person's id."""
    codec = data_converter(settings_for(Path("/nonexistent"), "127.0.0.1:0", "replay")).payload_codec
    assert codec is not None
    started = load(HISTORIES_DIR / "SummarizeWorkflow-episodes.json").events[0]
    [payload] = await codec.decode(list(started.workflow_execution_started_event_attributes.input.payloads))
    request = SummarizeInput.model_validate_json(payload.data)
    assert request.subject_ref.startswith("subject-")
    assert b"user-a" not in payload.data and b"owner" not in payload.data
