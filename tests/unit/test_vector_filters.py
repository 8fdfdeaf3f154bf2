"""ReadFilter -> engine filter translation, and the payload a point carries (never its text)."""

from __future__ import annotations

import uuid

import pytest
import qdrant_edge as qe
from qdrant_client import models

from memwarden.records import IndexPoint, MemoryType, NamespaceClause, ReadFilter, Scope, Sensitivity, Status
from memwarden.stores.vectors import matches_nothing, payload_of, point_id, prefetch_limit
from memwarden.stores.vectors_edge import edge_filter
from memwarden.stores.vectors_qdrant import qdrant_filter

NOW = 1_800_000_000.0

FULL = ReadFilter(
    tenant_id="t1",
    clauses=(
        NamespaceClause(scope=Scope.USER, owner_ids=("u1",)),
        NamespaceClause(scope=Scope.AGENT, agent_id="a1", owner_ids=("u1", "u2")),
        NamespaceClause(scope=Scope.SHARED, stores=("s1", "s2")),
        NamespaceClause(scope=Scope.USER, owner_ids=()),  # unsatisfiable: dropped
    ),
    types=(MemoryType.FACT, MemoryType.PREFERENCE),
    max_sensitivity=Sensitivity.INTERNAL,
    statuses=(Status.ACTIVE, Status.STALE),
)


def test_qdrant_filter_translation() -> None:
    expected = models.Filter(
        must=[
            models.FieldCondition(key="tenant_id", match=models.MatchValue(value="t1")),
            models.FieldCondition(key="status", match=models.MatchAny(any=["active", "stale"])),
            models.FieldCondition(key="type", match=models.MatchAny(any=["fact", "preference"])),
            models.FieldCondition(key="sensitivity_rank", range=models.Range(lte=2)),
            models.Filter(
                should=[
                    models.IsEmptyCondition(is_empty=models.PayloadField(key="expires_at_ts")),
                    models.FieldCondition(key="expires_at_ts", range=models.Range(gt=NOW)),
                ]
            ),
            models.Filter(
                should=[
                    models.Filter(
                        must=[
                            models.FieldCondition(key="scope", match=models.MatchValue(value="user")),
                            models.FieldCondition(key="owner_id", match=models.MatchAny(any=["u1"])),
                        ]
                    ),
                    models.Filter(
                        must=[
                            models.FieldCondition(key="scope", match=models.MatchValue(value="agent")),
                            models.FieldCondition(key="owner_id", match=models.MatchAny(any=["u1", "u2"])),
                            models.FieldCondition(key="agent_id", match=models.MatchValue(value="a1")),
                        ]
                    ),
                    models.Filter(
                        must=[
                            models.FieldCondition(key="scope", match=models.MatchValue(value="shared")),
                            models.FieldCondition(key="store", match=models.MatchAny(any=["s1", "s2"])),
                        ]
                    ),
                ]
            ),
        ]
    )
    assert qdrant_filter(FULL, NOW) == expected


def test_edge_filter_translation() -> None:
    expected = qe.Filter(
        must=[
            qe.FieldCondition("tenant_id", match=qe.MatchValue("t1")),
            qe.FieldCondition("status", match=qe.MatchAny(["active", "stale"])),
            qe.FieldCondition("type", match=qe.MatchAny(["fact", "preference"])),
            qe.FieldCondition("sensitivity_rank", range=qe.RangeFloat(lte=2.0)),
            qe.Filter(
                should=[
                    qe.IsEmptyCondition("expires_at_ts"),
                    qe.FieldCondition("expires_at_ts", range=qe.RangeFloat(gt=NOW)),
                ]
            ),
            qe.Filter(
                should=[
                    qe.Filter(
                        must=[
                            qe.FieldCondition("scope", match=qe.MatchValue("user")),
                            qe.FieldCondition("owner_id", match=qe.MatchAny(["u1"])),
                        ]
                    ),
                    qe.Filter(
                        must=[
                            qe.FieldCondition("scope", match=qe.MatchValue("agent")),
                            qe.FieldCondition("owner_id", match=qe.MatchAny(["u1", "u2"])),
                            qe.FieldCondition("agent_id", match=qe.MatchValue("a1")),
                        ]
                    ),
                    qe.Filter(
                        must=[
                            qe.FieldCondition("scope", match=qe.MatchValue("shared")),
                            qe.FieldCondition("store", match=qe.MatchAny(["s1", "s2"])),
                        ]
                    ),
                ]
            ),
        ]
    )
    # Edge filters have no __eq__; their repr spells out every field.
    assert repr(edge_filter(FULL, NOW)) == repr(expected)


def test_no_type_restriction_means_no_type_condition() -> None:
    rf = ReadFilter(tenant_id="t1", clauses=(NamespaceClause(scope=Scope.SHARED),))
    translated = qdrant_filter(rf, NOW)
    assert translated is not None and translated.must is not None
    keys = [c.key for c in translated.must if isinstance(c, models.FieldCondition)]
    assert keys == ["tenant_id", "status", "sensitivity_rank"]
    assert "type" not in repr(edge_filter(rf, NOW))


@pytest.mark.parametrize(
    "rf",
    [
        ReadFilter(tenant_id="t1", clauses=()),
        ReadFilter(tenant_id="t1", clauses=(NamespaceClause(scope=Scope.USER, owner_ids=()),)),
        ReadFilter(tenant_id="t1", clauses=(NamespaceClause(scope=Scope.SHARED, stores=()),)),
        ReadFilter(tenant_id="t1", clauses=(NamespaceClause(scope=Scope.SHARED),), types=()),
        ReadFilter(tenant_id="t1", clauses=(NamespaceClause(scope=Scope.SHARED),), statuses=()),
    ],
)
def test_filters_that_admit_nothing_are_not_sent(rf: ReadFilter) -> None:
    # An empty `should` would match everything in Qdrant: these must never reach an engine.
    assert matches_nothing(rf)
    assert qdrant_filter(rf, NOW) is None
    assert edge_filter(rf, NOW) is None


def _point(**kw: object) -> IndexPoint:
    base: dict[str, object] = {
        "memory_id": str(uuid.uuid4()),
        "tenant_id": "t1",
        "owner_id": "u1",
        "scope": Scope.AGENT,
        "agent_id": "a1",
        "store": None,
        "type": MemoryType.TASK,
        "status": Status.PENDING,
        "sensitivity_rank": 3,
        "expires_at_ts": None,
        "created_at_ts": NOW,
        "importance": 0.7,
        "dense": [0.0] * 384,
        "text": "the secret text must not leave the adapter",
    }
    base.update(kw)
    return IndexPoint(**base)  # type: ignore[arg-type]


def test_payload_has_filter_fields_only_and_never_the_text() -> None:
    p = _point()
    payload = payload_of(p)
    assert payload == {
        "tenant_id": "t1",
        "owner_id": "u1",
        "scope": "agent",
        "agent_id": "a1",
        "type": "task",
        "status": "pending",
        "sensitivity_rank": 3,
        "created_at_ts": NOW,
        "importance": 0.7,
    }
    assert p.text not in repr(payload)
    with_expiry = payload_of(_point(expires_at_ts=NOW + 5, scope=Scope.SHARED, agent_id=None, store="s1"))
    assert with_expiry["expires_at_ts"] == NOW + 5
    assert with_expiry["store"] == "s1"
    assert "agent_id" not in with_expiry


def test_point_id_is_canonical_and_rejects_non_uuids() -> None:
    u = uuid.uuid4()
    assert point_id(str(u).upper()) == str(u)
    with pytest.raises(ValueError):
        point_id("not-a-uuid")


def test_prefetch_limit_has_a_floor() -> None:
    assert prefetch_limit(1) == 20
    assert prefetch_limit(10) == 40
