"""The pure parts of remediation: the status machine's quarantine paths, selectors, ids and the receipt."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import TypeAdapter, ValidationError

from memwarden.forget import receipt_hash
from memwarden.records import QUARANTINABLE_STATUSES, Status, can_transition
from memwarden.remediation import (
    MemoriesSelector,
    RollbackRequest,
    RollbackSelector,
    SourceRecordSelector,
    WriterSelector,
    build_rollback_receipt,
    redacted_selector,
    restored_id,
    rollback_id,
)

NOW = datetime(2026, 12, 3, tzinfo=UTC)
KEY = b"k" * 32


@pytest.mark.parametrize("status", sorted(QUARANTINABLE_STATUSES))
def test_what_is_in_use_or_waiting_can_be_quarantined(status: Status) -> None:
    assert can_transition(status, Status.QUARANTINED)


@pytest.mark.parametrize(
    ("target", "allowed"),
    [(Status.ACTIVE, True), (Status.SUPERSEDED, True), (Status.TOMBSTONED, True), (Status.STALE, False)],
)
def test_a_quarantined_memory_is_released_or_forgotten_only(target: Status, allowed: bool) -> None:
    assert can_transition(Status.QUARANTINED, target) is allowed


@pytest.mark.parametrize("status", [Status.SUPERSEDED, Status.REJECTED, Status.TOMBSTONED, Status.PURGED])
def test_history_is_never_quarantined(status: Status) -> None:
    assert not can_transition(status, Status.QUARANTINED)


def test_a_writer_window_must_be_zoned_ordered_and_bounded() -> None:
    WriterSelector(writer="agent:svc-a", since=NOW, until=NOW + timedelta(hours=1))
    with pytest.raises(ValidationError):
        WriterSelector(writer="agent:svc-a", since=NOW, until=NOW)
    with pytest.raises(ValidationError):
        WriterSelector(writer="agent:svc-a", since=NOW, until=NOW + timedelta(days=400))
    with pytest.raises(ValidationError):
        WriterSelector(writer="agent:svc-a", since=datetime(2026, 1, 1), until=NOW)  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        WriterSelector(writer="operator:ops", since=NOW, until=NOW + timedelta(hours=1))  # never writes


def test_selectors_are_a_closed_union_and_listed_ids_are_bounded() -> None:
    adapter: TypeAdapter[object] = TypeAdapter(RollbackSelector)
    assert isinstance(adapter.validate_python({"kind": "memories", "memory_ids": ["a"]}), MemoriesSelector)
    with pytest.raises(ValidationError):
        adapter.validate_python({"kind": "tenant"})
    with pytest.raises(ValidationError):
        MemoriesSelector(memory_ids=[])
    with pytest.raises(ValidationError):
        MemoriesSelector(memory_ids=[str(i) for i in range(501)])
    with pytest.raises(ValidationError):
        RollbackRequest.model_validate({"selector": {"kind": "memories", "memory_ids": ["a"]}, "reason": "Has Space"})


def test_a_source_key_is_redacted_and_ids_are_deterministic() -> None:
    source = SourceRecordSelector(system="crm", key="rec-42")
    body = redacted_selector(source, KEY, "t1")
    assert "key" not in body and "rec-42" not in str(body) and len(body["subject_hash"]) == 64
    assert body == redacted_selector(source, KEY, "t1") != redacted_selector(source, KEY, "t2")
    listed = redacted_selector(MemoriesSelector(memory_ids=["b", "a", "b"]), KEY, "t1")
    assert listed["memory_ids"] == ["a", "b"]
    assert rollback_id("t1", body, None, ["x", "y"]) == rollback_id("t1", body, None, ["y", "x"])
    assert rollback_id("t1", body, None, ["x"]) != rollback_id("t1", body, "team", ["x"])
    assert restored_id("r1", "m1") == restored_id("r1", "m1") != restored_id("revert", "m1")


def test_the_receipt_hash_covers_counts_and_evidence() -> None:
    row = {
        "id": "r1",
        "tenant_id": "t1",
        "reason": "poisoned_agent",
        "store": None,
        "selector": {"kind": "memories", "memory_ids": ["a"]},
        "counts": {"quarantined": 1, "reads": {"searches": 2}},
        "created_at": NOW,
    }
    sink = {
        "name": "cache",
        "method": "delete_prefix",
        "status": "verified",
        "applied": 1,
        "attempts": 1,
        "verified_at": NOW,
        "evidence": {"remaining": 0},
    }
    one = build_rollback_receipt(row, [sink], requester_hash="h", completed_at=NOW)
    more_reads = build_rollback_receipt(
        row | {"counts": {"quarantined": 1, "reads": {"searches": 3}}}, [sink], requester_hash="h", completed_at=NOW
    )
    assert receipt_hash(one) == receipt_hash(build_rollback_receipt(row, [sink], requester_hash="h", completed_at=NOW))
    assert receipt_hash(one) != receipt_hash(more_reads)
