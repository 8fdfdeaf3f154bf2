"""Retention by class, as the expiry sweep applies it (the SQL predicate is tested on the dev server)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memwarden.policy.retention import RetentionClass, class_expired

NOW = datetime(2026, 12, 1, tzinfo=UTC)
CLASSES = {
    "standard": RetentionClass(),
    "short": RetentionClass(max_age_days=7),
    "legal_hold": RetentionClass(hold=True),
}

ROWS = [
    ("standard", 100, None, False),  # no TTL, no class limit: kept
    ("standard", 100, -1, True),  # past expires_at
    ("standard", 1, 5, False),
    ("short", 8, None, True),  # older than the class's 7 days
    ("short", 6, None, False),
    ("short", 6, -1, True),  # the sooner of the two
    ("legal_hold", 400, -100, False),  # held: never expired by the sweep
    ("unknown", 100, -1, True),  # an unknown class is standard
    ("unknown", 100, None, False),
]


@pytest.mark.parametrize(("cls", "age_days", "expires_in_days", "expected"), ROWS)
def test_class_expired(cls: str, age_days: int, expires_in_days: int | None, expected: bool) -> None:
    expires = NOW + timedelta(days=expires_in_days) if expires_in_days is not None else None
    assert class_expired(cls, NOW - timedelta(days=age_days), expires, NOW, CLASSES) is expected
