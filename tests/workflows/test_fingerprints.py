"""The determinism fingerprint of the long-lived workflows (`fingerprints.py`, `fingerprints.json`).

The first tests are the gate: the code must match the checked-in fingerprint, and the fingerprint must
name every command the recorded histories hold. The others show it can fail, and how: an added timer
or a renamed activity fails with the advice to patch, a changed condition is flagged as code, a patched
change is told to keep the old histories, and docstrings, comments and formatting change nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.workflows.fingerprints import (
    FINGERPRINTS,
    LONG_LIVED,
    SHORT_LIVED,
    Fingerprint,
    compute,
    explain,
    load,
    load_sources,
    patch_ids,
    recorded_commands,
    uncovered,
    write,
)
from tests.workflows.record_histories import workflow_names


def test_every_workflow_is_long_or_short_lived() -> None:
    """A new workflow must be classified: fingerprinted (its runs outlive a deploy) or not, and why."""
    assert set(LONG_LIVED).isdisjoint(SHORT_LIVED)
    assert set(LONG_LIVED) | set(SHORT_LIVED) == workflow_names()


def test_long_lived_workflows_match_their_fingerprints() -> None:
    message = explain(load(), compute())
    if message is not None:
        pytest.fail(message, pytrace=False)


def test_the_fingerprint_names_every_command_the_recorded_histories_hold() -> None:
    """The code's shape is read statically: the histories recorded by that code show it misses nothing."""
    fingerprints = compute()
    for workflow in LONG_LIVED:
        recorded = recorded_commands(workflow)
        assert recorded, f"no recorded history for {workflow}: add a case to record_histories.CASES"
        for history, issued in recorded.items():
            assert uncovered(fingerprints[workflow], issued) == set(), history


def test_a_command_the_shape_does_not_name_is_reported() -> None:
    forget = compute()["ForgetWorkflow"]
    assert uncovered(forget, {"activity forget_purge", "complete"}) == set()
    assert uncovered(forget, {"activity forget_purge", "activity forget_audit", "timer"}) == {"activity forget_audit"}
    # A patch's search-attribute upsert is named only where the code patches.
    assert uncovered(forget, {"upsert search attributes"}) == {"upsert search attributes"}
    assert (
        uncovered(compute()["ImportWorkflow"], {"patch import-conversation-lines", "upsert search attributes"}) == set()
    )


def altered(module: str, old: str, new: str) -> dict[str, str]:
    """Today's workflow sources with one edit to one module (the edit must apply)."""
    sources = load_sources()
    assert sources[module].count(old) == 1, f"{old!r} not found once in {module}"
    sources[module] = sources[module].replace(old, new)
    return sources


def test_docstrings_comments_and_formatting_do_not_count() -> None:
    today = compute()
    reformatted = {name: ast.unparse(ast.parse(text)) for name, text in load_sources().items()}  # no comments
    assert compute(reformatted) == today
    reworded = altered("workflows.revalidate", '"""Retries of the activity itself', '"""Retries (reworded)')
    reworded["workflows.forget"] = reworded["workflows.forget"].replace(
        "        plan = await", "        # planned first\n        plan = await"
    )
    assert compute(reworded) == today


def test_an_added_timer_fails_with_the_advice_to_patch() -> None:
    sources = altered(
        "workflows.forget",
        "        plan = await workflow.execute_activity(",
        "        await workflow.sleep(timedelta(seconds=1))\n        plan = await workflow.execute_activity(",
    )
    message = explain(load(), compute(sources))
    assert message is not None
    assert "ForgetWorkflow (workflows/forget.py)" in message
    assert "commands of `run`: was ['activity forget_plan'" in message and "now ['timer (sleep)'" in message
    assert "they would fail" in message
    assert "Do not just regenerate the fingerprint" in message
    assert 'if workflow.patched("<what-changed>"):' in message
    assert "docs/decisions/workflow-versioning.md" in message
    assert "RevalidateWorkflow" not in message  # only the workflow that changed is named


def test_a_renamed_activity_changes_the_workflows_that_call_it() -> None:
    sources = altered("memwarden.temporal.names", 'FORGET_PURGE = "forget_purge"', 'FORGET_PURGE = "forget_purge_v2"')
    message = explain(load(), compute(sources))
    assert message is not None
    assert "activity forget_purge_v2" in message and "code `memwarden.temporal.names.FORGET_PURGE` changed" in message
    assert "RetentionWorkflow" not in message  # it starts ForgetWorkflow by name; Forget's body is Forget's


def test_a_changed_signature_or_handler_name_counts() -> None:
    sources = altered("workflows.revalidate", 'SOURCE_EVENT_SIGNAL = "source_event"', 'SOURCE_EVENT_SIGNAL = "event"')
    message = explain(load(), compute(sources))
    assert message is not None
    assert "interface of `signal event`: was (none)" in message
    assert "interface of `signal source_event`: was (self, event: SourceEvent) -> None, now (none)" in message


def test_a_changed_condition_is_flagged_as_code() -> None:
    """The commands stay the same, but how often the loop goes round does not: still a change to guard."""
    sources = altered("workflows.revalidate", "attempt >= request.max_attempts", "attempt > request.max_attempts")
    message = explain(load(), compute(sources))
    assert message is not None
    assert "code `workflows.revalidate.RevalidateWorkflow` changed" in message
    assert "commands of" not in message
    assert "can change the commands they issue" in message and "Do not just regenerate" in message


def test_a_patched_change_is_told_to_keep_the_old_histories() -> None:
    sources = altered(
        "workflows.forget",
        "        plan = await workflow.execute_activity(",
        '        if workflow.patched("forget-pause"):\n'
        "            await workflow.sleep(timedelta(seconds=1))\n"
        "        plan = await workflow.execute_activity(",
    )
    assert patch_ids(sources) - patch_ids() == {"forget-pause"}
    fingerprint: Fingerprint = compute(sources)["ForgetWorkflow"]
    assert fingerprint.patches == ["forget-pause"]
    assert fingerprint.commands["run"][:2] == ["patch forget-pause", "timer (sleep)"]
    message = explain(load(), compute(sources))
    assert message is not None
    assert "guarded by workflow.patched('forget-pause')" in message
    assert "tests/workflows/histories/forget-pause/" in message and "Do not just regenerate" not in message


def test_the_checked_in_file_is_what_write_produces(tmp_path: Path) -> None:
    """Accepting a fingerprint is `make workflow-fingerprints`, not a hand edit: same text, byte for byte."""
    written = tmp_path / "fingerprints.json"
    write(compute(), written)
    assert written.read_text() == FINGERPRINTS.read_text()
    assert set(load()) == set(LONG_LIVED)
