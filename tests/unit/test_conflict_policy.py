"""Several sources disagree: the designated system of record, then trusted provenance, then newer evidence."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memwarden.policy.conflict import Claim, resolve
from memwarden.records import SourceKind

T0 = datetime(2026, 12, 1, tzinfo=UTC)
OLD, NEW = T0, T0 + timedelta(days=1)
S, U, A, D, TL, M = (
    SourceKind.SYSTEM,
    SourceKind.USER,
    SourceKind.APP,
    SourceKind.DOCUMENT,
    SourceKind.TOOL,
    SourceKind.MODEL,
)

# each row: claims as (label, kind, designated, observed) -> winner's label
TABLE = [
    # the designated system of record wins over everything else
    ([("a", U, False, NEW), ("b", S, True, OLD)], "b"),
    ([("a", S, True, OLD), ("b", U, False, NEW)], "a"),
    ([("a", M, True, OLD), ("b", U, False, NEW)], "a"),
    ([("a", TL, False, NEW), ("b", S, True, OLD), ("c", U, False, NEW)], "b"),
    # no designated claim: trusted provenance
    ([("a", S, False, NEW), ("b", U, False, OLD)], "b"),
    ([("a", U, False, OLD), ("b", S, False, NEW)], "a"),
    ([("a", A, False, NEW), ("b", S, False, OLD)], "b"),
    ([("a", TL, False, NEW), ("b", D, False, OLD)], "b"),
    ([("a", M, False, NEW), ("b", TL, False, OLD)], "b"),
    # same standing: newer evidence
    ([("a", S, False, OLD), ("b", S, False, NEW)], "b"),
    ([("a", S, True, OLD), ("b", S, True, NEW)], "b"),
    ([("a", U, False, NEW), ("b", U, False, OLD)], "a"),
    # a full tie keeps the value already held (listed first)
    ([("a", S, True, OLD), ("b", S, True, OLD)], "a"),
    ([("a", U, False, NEW), ("b", U, False, NEW), ("c", U, False, NEW)], "a"),
    # one claim: itself
    ([("a", M, False, OLD)], "a"),
]


@pytest.mark.parametrize(("claims", "winner"), TABLE)
def test_resolve(claims: list[tuple[str, SourceKind, bool, datetime]], winner: str) -> None:
    got = resolve([Claim(label=lab, source_kind=k, designated=d, observed_at=t) for lab, k, d, t in claims])
    assert got.label == winner


def test_resolve_needs_a_claim() -> None:
    with pytest.raises(ValueError):
        resolve([])
