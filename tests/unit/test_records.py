"""The status machine and the ReadFilter predicate, as pure functions."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memwarden.records import (
    InvalidTransition,
    MemoryRecord,
    MemoryType,
    NamespaceClause,
    ReadFilter,
    Scope,
    Sensitivity,
    SourceKind,
    Status,
    can_transition,
    check_transition,
    content_hash,
    sensitivity_rank,
)

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def record(**kw: object) -> MemoryRecord:
    base: dict[str, object] = dict(
        id="m1",
        tenant_id="t1",
        owner_id="alice",
        type=MemoryType.PREFERENCE,
        content="likes tea",
        content_hash=content_hash("likes tea"),
        source_kind=SourceKind.USER,
        reason="user_explicit_preference",
        created_at=NOW,
        updated_at=NOW,
    )
    base.update(kw)
    return MemoryRecord(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("current", "target", "ok"),
    [
        (Status.PENDING, Status.ACTIVE, True),
        (Status.PENDING, Status.REJECTED, True),
        (Status.PENDING, Status.STALE, False),
        (Status.ACTIVE, Status.STALE, True),
        (Status.STALE, Status.ACTIVE, True),
        (Status.STALE, Status.INVALIDATED, True),
        (Status.ACTIVE, Status.SUPERSEDED, True),
        (Status.ACTIVE, Status.QUARANTINED, True),
        (Status.ACTIVE, Status.EXPIRED, True),
        (Status.SUPERSEDED, Status.ACTIVE, False),
        (Status.REJECTED, Status.ACTIVE, False),
        (Status.EXPIRED, Status.ACTIVE, False),
        (Status.TOMBSTONED, Status.PURGED, True),
        (Status.TOMBSTONED, Status.ACTIVE, False),
        (Status.PURGED, Status.TOMBSTONED, False),
        (Status.ACTIVE, Status.PURGED, False),
    ],
)
def test_transitions(current: Status, target: Status, ok: bool) -> None:
    assert can_transition(current, target) is ok
    if not ok:
        with pytest.raises(InvalidTransition):
            check_transition(current, target)


@pytest.mark.parametrize("status", [s for s in Status if s not in (Status.PURGED, Status.TOMBSTONED)])
def test_any_non_purged_state_can_be_forgotten(status: Status) -> None:
    assert can_transition(status, Status.TOMBSTONED)


def test_sensitivity_order_is_semantic_not_alphabetical() -> None:
    ranks = [sensitivity_rank(s) for s in ("public", "low", "internal", "confidential", "restricted")]
    assert ranks == sorted(ranks) == [0, 1, 2, 3, 4]


def user_filter(**kw: object) -> ReadFilter:
    base: dict[str, object] = dict(tenant_id="t1", clauses=(NamespaceClause(scope=Scope.USER, owner_ids=("alice",)),))
    base.update(kw)
    return ReadFilter(**base)  # type: ignore[arg-type]


def test_filter_admits_own_memory_and_nothing_else() -> None:
    rf = user_filter()
    assert rf.admits(record())
    assert not rf.admits(record(tenant_id="t2"))
    assert not rf.admits(record(owner_id="bob"))
    assert not rf.admits(record(scope=Scope.AGENT, agent_id="a1"))
    assert not rf.admits(record(status=Status.PENDING))
    assert rf.admits(record(status=Status.STALE))


def test_filter_types_sensitivity_and_expiry() -> None:
    assert not user_filter(types=(MemoryType.FACT,)).admits(record())
    assert not user_filter(max_sensitivity=Sensitivity.PUBLIC).admits(record(sensitivity=Sensitivity.LOW))
    assert user_filter(max_sensitivity=Sensitivity.LOW).admits(record(sensitivity=Sensitivity.LOW))
    assert not user_filter().admits(record(expires_at=NOW - timedelta(seconds=1)), now=NOW)
    assert user_filter().admits(record(expires_at=NOW + timedelta(seconds=1)), now=NOW)


def test_filter_without_clauses_admits_nothing() -> None:
    assert not ReadFilter(tenant_id="t1", clauses=()).admits(record())


def test_shared_store_clause() -> None:
    rf = ReadFilter(tenant_id="t1", clauses=(NamespaceClause(scope=Scope.SHARED, stores=("team",)),))
    assert rf.admits(record(scope=Scope.SHARED, store="team"))
    assert not rf.admits(record(scope=Scope.SHARED, store="other"))
