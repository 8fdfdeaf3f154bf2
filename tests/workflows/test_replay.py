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
    from memwarden.records import RememberInput, RememberResult
    from tests.workflows.record_histories import (
        CASES,
        HISTORIES_DIR,
        LEGACY_DIR,
        SYNTHETIC,
        Case,
        settings_for,
        unsealed_payloads,
        workflow_names,
    )
    from worker.sandbox import SANDBOX
    from worker.temporal_client import data_converter
    from workflows import ALL_WORKFLOWS

CURRENT_FILES = sorted(HISTORIES_DIR.glob("*.json"))
LEGACY_FILES = sorted(LEGACY_DIR.glob("*.json"))
HISTORY_FILES = CURRENT_FILES + LEGACY_FILES
"""Today's cases and the histories older workflow versions left behind: all must replay."""


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
    result = await replayer(list(ALL_WORKFLOWS)).replay_workflow(history)
    assert result.replay_failure is None


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

REMEMBER_HISTORY = LEGACY_DIR / "RememberWorkflow-user_preference.json"
"""A pre-gate run: the altered workflows below are changes to that version's command sequence."""


def test_legacy_remember_histories_are_kept() -> None:
    """Runs from before the write gate replay down the unpatched branch; deleting them would hide a break."""
    assert {p.stem for p in LEGACY_FILES} >= {"RememberWorkflow-user_preference", "RememberWorkflow-agent_private"}
    two_step = {f"RememberWorkflow-v1_{case}" for case in ("gated_add", "gated_update", "noop_duplicate", "staged")}
    assert {p.stem for p in LEGACY_FILES} >= two_step | {"RememberWorkflow-v1_rejected_secret"}


def test_current_remember_histories_take_one_local_activity() -> None:
    """Today's cases were recorded on the one-step path: one local-activity marker before the result."""
    for path in CURRENT_FILES:
        if path.stem.startswith("RememberWorkflow-"):
            markers = [e for e in load(path).events if e.event_type == EventType.EVENT_TYPE_MARKER_RECORDED]
            names = [m.marker_recorded_event_attributes.marker_name for m in markers]
            assert names.count("core_local_activity") == 1, (path.name, names)


@workflow.defn(name="RememberWorkflow")
class RememberWorkflowWithAddedTimer:
    """RememberWorkflow as someone might 'harmlessly' change it: a short pause before the commit."""

    @workflow.run
    async def run(self, candidate: RememberInput) -> RememberResult:
        await workflow.sleep(timedelta(seconds=1))
        return await workflow.execute_local_activity(
            "commit_memory",
            candidate,
            result_type=RememberResult,
            start_to_close_timeout=timedelta(seconds=10),
            retry_policy=RetryPolicy(maximum_attempts=3),
        )


@workflow.defn(name="RememberWorkflow")
class RememberWorkflowWithRenamedActivity:
    """RememberWorkflow calling its commit step by another activity name."""

    @workflow.run
    async def run(self, candidate: RememberInput) -> RememberResult:
        return await workflow.execute_local_activity(
            "commit_memory_v2",
            candidate,
            result_type=RememberResult,
            start_to_close_timeout=timedelta(seconds=10),
        )


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


async def _summarize_input(path: Path) -> bytes:
    """The decoded (codec key) input of a recorded SummarizeWorkflow run."""
    codec = data_converter(settings_for(Path("/nonexistent"), "127.0.0.1:0", "replay")).payload_codec
    assert codec is not None
    started = load(path).events[0].workflow_execution_started_event_attributes
    [payload] = await codec.decode(list(started.input.payloads))
    return payload.data


async def test_summarize_history_carries_a_handle_not_the_owner() -> None:
    """Today's input names the owner by claim-check handle; the legacy one (the control) held the id."""
    today = await _summarize_input(HISTORIES_DIR / "SummarizeWorkflow-episodes.json")
    assert b'"subject_ref":"subject-' in today and b"user-a" not in today
    legacy = await _summarize_input(LEGACY_DIR / "SummarizeWorkflow-episodes_owner_id.json")
    assert b'"owner_id":"user-a"' in legacy
