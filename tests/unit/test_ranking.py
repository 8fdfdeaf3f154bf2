"""The pure ranking of Retrieve: floor first, then fusion, then recency and importance."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memwarden.policy.ranking import (
    Candidate,
    RankingParams,
    Relevance,
    fused,
    merge,
    passes_floor,
    rank,
    recency,
)

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def cand(
    mid: str, cosine: float | None, bm25: float | None, *, age_days: float = 0, importance: float = 0.5
) -> Candidate:
    return Candidate(
        relevance=Relevance(memory_id=mid, cosine=cosine, bm25=bm25),
        created_at=NOW - timedelta(days=age_days),
        importance=importance,
    )


def test_merge_joins_by_id_and_keeps_missing_as_none() -> None:
    got = merge([("a", 0.9), ("b", 0.5)], [("b", 7.0), ("c", 3.0)])
    assert got == [Relevance("a", 0.9, None), Relevance("b", 0.5, 7.0), Relevance("c", None, 3.0)]


def test_floor_needs_meaning_or_a_real_keyword_match() -> None:
    params = RankingParams(min_cosine=0.3, min_bm25=1.0)
    assert passes_floor(Relevance("a", 0.31, None), params)
    assert passes_floor(Relevance("a", 0.05, 1.2), params)
    assert not passes_floor(Relevance("a", 0.29, 0.9), params)
    assert not passes_floor(Relevance("a", None, None), params)


def test_fusion_weights_cosine_and_max_normalised_bm25() -> None:
    params = RankingParams(dense_weight=0.4, sparse_weight=0.6)
    scores = fused([Relevance("a", 0.5, 10.0), Relevance("b", 0.8, 5.0), Relevance("c", -0.2, None)], params)
    assert scores["a"] == pytest.approx(0.4 * 0.5 + 0.6 * 1.0)
    assert scores["b"] == pytest.approx(0.4 * 0.8 + 0.6 * 0.5)
    assert scores["c"] == 0.0  # a negative cosine adds nothing, it does not subtract


def test_fusion_weights_move_the_order() -> None:
    rels = [Relevance("kw", 0.3, 10.0), Relevance("sem", 0.9, 1.0)]
    assert max(fused(rels, RankingParams(dense_weight=0.1, sparse_weight=0.9)).items(), key=lambda x: x[1])[0] == "kw"
    assert max(fused(rels, RankingParams(dense_weight=0.9, sparse_weight=0.1)).items(), key=lambda x: x[1])[0] == "sem"
    with pytest.raises(ValueError):
        fused(rels, RankingParams(dense_weight=0.0, sparse_weight=0.0))


def test_rank_drops_below_floor_before_anything_else() -> None:
    # A brand-new, most important memory below the floor never beats an old relevant one.
    got = rank([cand("junk", 0.1, None, importance=1.0), cand("old", 0.7, 4.0, age_days=3650)], NOW, 5)
    assert [r.memory_id for r in got] == ["old"]


def test_recency_and_importance_break_near_ties_only() -> None:
    got = rank([cand("old", 0.6, 5.0, age_days=365), cand("new", 0.6, 5.0)], NOW, 5)
    assert [r.memory_id for r in got] == ["new", "old"]
    got = rank([cand("low", 0.6, 5.0, importance=0.1), cand("high", 0.6, 5.0, importance=0.9)], NOW, 5)
    assert [r.memory_id for r in got] == ["high", "low"]
    # A clearly better match wins over recency and importance (each takes at most 10%).
    got = rank(
        [cand("good-old", 0.8, 9.0, age_days=3650, importance=0.0), cand("weak-new", 0.3, 2.0, importance=1.0)], NOW, 5
    )
    assert got[0].memory_id == "good-old"


def test_rank_cuts_at_k_and_is_deterministic() -> None:
    cands = [cand(f"m{i}", 0.5, 3.0) for i in range(10)]
    got = rank(cands, NOW, 3)
    assert [r.memory_id for r in got] == ["m0", "m1", "m2"]  # equal scores: by id
    assert rank(list(reversed(cands)), NOW, 3) == got
    assert rank(cands, NOW, 0) == []


def test_recency_halves_per_half_life_and_counts_confirmation() -> None:
    created = NOW - timedelta(days=90)
    assert recency(created, NOW, 90.0) == pytest.approx(0.5)
    assert recency(created, NOW, 90.0, confirmed_at=NOW) == pytest.approx(1.0)
    assert recency(NOW + timedelta(days=1), NOW, 90.0) == 1.0  # clock skew never exceeds 1
