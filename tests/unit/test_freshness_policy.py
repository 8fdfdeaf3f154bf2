"""Freshness policy, table-tested: per type and consequence, which mechanisms apply; TTL is not validity."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memwarden.policy.freshness import (
    DEFAULT_WINDOW_SECONDS,
    Fallback,
    Trigger,
    check_at_read,
    on_deadline,
    read_freshness,
    rule,
)
from memwarden.records import Consequence, Freshness, MemoryRecord, MemoryType, SourceKind, Status

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
H, L = Consequence.HIGH, Consequence.LOW
RT, WIN, VER, EV, PER = Trigger.READ_TIME, Trigger.WINDOW, Trigger.SOURCE_VERSION, Trigger.EVENT, Trigger.PERIODIC

# (type, consequence, has_source, volatile, window override) -> triggers
RULES = [
    (MemoryType.FACT, H, True, False, None, {RT, WIN, VER, EV}),
    (MemoryType.FACT, L, True, False, None, {WIN, VER, EV}),
    (MemoryType.FACT, L, True, True, None, {WIN, VER, EV, PER}),
    (MemoryType.FACT, H, True, True, 0, {RT, WIN, VER, EV, PER}),
    (MemoryType.FACT, H, False, False, None, set()),
    (MemoryType.FACT, L, False, True, None, set()),
    (MemoryType.TASK, L, True, False, None, {WIN, VER, EV, PER}),
    (MemoryType.TASK, H, True, False, None, {RT, WIN, VER, EV, PER}),
    (MemoryType.PREFERENCE, H, True, False, None, {RT, WIN, VER, EV}),
    (MemoryType.PREFERENCE, L, True, False, None, {WIN, VER, EV}),
    (MemoryType.PREFERENCE, H, False, False, None, set()),
    (MemoryType.PROCEDURAL, H, True, False, None, {RT, WIN, VER, EV}),
    (MemoryType.EPISODIC, H, True, False, None, {VER, EV}),
    (MemoryType.EPISODIC, L, True, False, None, {VER, EV}),
    (MemoryType.EPISODIC, L, True, False, 60, {WIN, VER, EV}),
    (MemoryType.SUMMARY, H, True, False, None, {VER, EV}),
    (MemoryType.SUMMARY, L, False, False, None, set()),
]


@pytest.mark.parametrize(("mtype", "consequence", "has_source", "volatile", "window", "expected"), RULES)
def test_which_mechanisms_apply(
    mtype: MemoryType, consequence: Consequence, has_source: bool, volatile: bool, window: int | None, expected: set
) -> None:
    got = rule(mtype, consequence, has_source=has_source, volatile=volatile, window_seconds=window)
    assert set(got.triggers) == expected
    if Trigger.WINDOW in expected:
        assert got.window_seconds == (window if window is not None else DEFAULT_WINDOW_SECONDS[mtype])


AGO = {"now": timedelta(0), "1h": timedelta(hours=1), "2d": timedelta(days=2), "60d": timedelta(days=60)}

# (type, consequence, has_source, status, confirmed ago, window override) -> checked at this read?
CHECKS = [
    (MemoryType.FACT, H, True, Status.ACTIVE, "now", None, True),  # read-time: always on high
    (MemoryType.FACT, L, True, Status.ACTIVE, "now", None, False),  # inside the window
    (MemoryType.FACT, L, True, Status.ACTIVE, "1h", None, False),
    (MemoryType.FACT, L, True, Status.ACTIVE, "2d", None, True),  # window (1 day) passed
    (MemoryType.FACT, L, True, Status.STALE, "now", None, True),  # a change was announced
    (MemoryType.FACT, L, True, Status.ACTIVE, "now", 0, True),  # a source that wants every read checked
    (MemoryType.FACT, H, False, Status.ACTIVE, "60d", None, False),  # nothing to ask
    (MemoryType.FACT, L, False, Status.STALE, "60d", None, False),
    (MemoryType.TASK, L, True, Status.ACTIVE, "1h", None, True),  # task window: 1 hour
    (MemoryType.PREFERENCE, L, True, Status.ACTIVE, "2d", None, False),  # 30 days
    (MemoryType.PREFERENCE, L, True, Status.ACTIVE, "60d", None, True),
    (MemoryType.PREFERENCE, H, True, Status.ACTIVE, "now", None, True),
    (MemoryType.EPISODIC, H, True, Status.ACTIVE, "60d", None, False),  # the past does not go out of date
    (MemoryType.EPISODIC, L, True, Status.STALE, "now", None, True),  # ... unless its source says it changed
    (MemoryType.SUMMARY, H, True, Status.ACTIVE, "60d", None, False),
]


@pytest.mark.parametrize(("mtype", "consequence", "has_source", "status", "ago", "window", "expected"), CHECKS)
def test_when_a_read_checks_the_source(
    mtype: MemoryType,
    consequence: Consequence,
    has_source: bool,
    status: Status,
    ago: str,
    window: int | None,
    expected: bool,
) -> None:
    r = rule(mtype, consequence, has_source=has_source, window_seconds=window)
    confirmed = NOW - AGO[ago]
    assert check_at_read(r, status, confirmed, confirmed - timedelta(days=1), NOW) is expected


def test_window_counts_from_creation_when_never_confirmed() -> None:
    r = rule(MemoryType.FACT, L, has_source=True)
    assert check_at_read(r, Status.ACTIVE, None, NOW - timedelta(days=2), NOW) is True
    assert check_at_read(r, Status.ACTIVE, None, NOW - timedelta(hours=2), NOW) is False


def _record(expires_at: datetime | None, status: Status = Status.ACTIVE) -> MemoryRecord:
    return MemoryRecord(
        id="m",
        tenant_id="t",
        owner_id="o",
        type=MemoryType.FACT,
        content="synthetic",
        content_hash="h",
        source_kind=SourceKind.USER,
        reason="user_stated_fact",
        status=status,
        expires_at=expires_at,
        created_at=NOW - timedelta(days=3),
        updated_at=NOW,
    )


def test_ttl_is_not_validity() -> None:
    """Nothing in the policy reads expires_at: far from expiry can still need a check; near expiry is still fresh."""
    r = rule(MemoryType.FACT, L, has_source=True)
    stale_confirmation = NOW - timedelta(days=5)
    assert check_at_read(r, Status.ACTIVE, stale_confirmation, stale_confirmation, NOW)  # expires in 10 years or never
    assert read_freshness(_record(NOW + timedelta(seconds=1))) is Freshness.FRESH  # about to expire: still fresh
    assert read_freshness(_record(NOW + timedelta(days=3650), Status.STALE)) is Freshness.STALE


# (consequence, status) -> fallback when the source gives no usable answer in time
FALLBACKS = [
    (H, Status.ACTIVE, Fallback.WITHHELD, "source_unavailable"),
    (H, Status.STALE, Fallback.WITHHELD, "source_unavailable"),
    (L, Status.ACTIVE, Fallback.UNVERIFIED, None),
    (L, Status.STALE, Fallback.WITHHELD, "stale"),
]


@pytest.mark.parametrize(("consequence", "status", "action", "reason"), FALLBACKS)
def test_deadline_fallback(consequence: Consequence, status: Status, action: Fallback, reason: str | None) -> None:
    got = on_deadline(consequence, status)
    assert got.action is action and got.reason == reason
