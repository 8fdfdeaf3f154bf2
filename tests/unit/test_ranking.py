"""The pure ranking of Retrieve: floor first, then fusion, then recency and importance."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memwarden.policy.ranking import (
    Candidate,
    RankingParams,
    Relevance,
    contextual,
    fused,
    merge,
    names_speaker,
    passes_floor,
    query_words,
    rank,
    recency,
    session_key,
    turn_position,
)

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def cand(
    mid: str,
    cosine: float | None,
    bm25: float | None,
    *,
    age_days: float = 0,
    importance: float = 0.5,
    session: str | None = None,
    turn: int | None = None,
    named: bool = False,
) -> Candidate:
    return Candidate(
        relevance=Relevance(memory_id=mid, cosine=cosine, bm25=bm25),
        created_at=NOW - timedelta(days=age_days),
        importance=importance,
        session=session,
        turn=turn,
        speaker_named=named,
    )


ALL = RankingParams(relative_floor=0.0)
"""Every candidate above the absolute floor: for the tests that pin the order of the tail, which the
relative floor would drop (its own tests are at the end)."""
NO_CONTEXT = RankingParams(neighbour_weight=0.0, session_weight=0.0, relative_floor=0.0)


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


def test_turn_positions_and_session_keys() -> None:
    assert turn_position("D3:12") == 12
    assert turn_position("12") == 12
    assert turn_position("turn-7 ") == 7
    assert turn_position("intro") is None
    assert turn_position("") is None and turn_position(None) is None
    assert session_key("alice", "s1") != session_key("bob", "s1")  # sessions are per person
    assert session_key("alice", None) is None and session_key("alice", "") is None


def test_the_turn_after_a_matching_question_is_lifted_above_a_lone_weak_match() -> None:
    """ "what are Mel's plans for the summer?" matches the question turn; the answer is the next one."""
    question = cand("asks", 0.6, 8.0, session="s", turn=4)
    answer = cand("answers", 0.3, 1.5, session="s", turn=5)
    elsewhere = cand("elsewhere", 0.35, 2.0, session="t", turn=9)
    assert [r.memory_id for r in rank([question, answer, elsewhere], NOW, 3, NO_CONTEXT)] == [
        "asks",
        "elsewhere",
        "answers",
    ]
    assert [r.memory_id for r in rank([question, answer, elsewhere], NOW, 3, ALL)] == ["asks", "answers", "elsewhere"]


def test_earlier_neighbours_count_more_and_the_window_bounds_them() -> None:
    params = RankingParams(neighbour_weight=0.2, neighbour_window=2, previous_turn_factor=1.5, session_weight=0.0)
    strong = cand("strong", 0.8, 9.0, session="s", turn=10)
    after = cand("after", 0.3, 1.5, session="s", turn=11)  # strong is its earlier neighbour
    before = cand("before", 0.3, 1.5, session="s", turn=9)  # strong is its later neighbour
    far = cand("far", 0.3, 1.5, session="s", turn=14)  # three or more turns from all: outside the window
    scores = fused([c.relevance for c in (strong, after, before, far)], params)
    got = contextual([strong, after, before, far], scores, params)
    assert got["after"] > got["before"] > got["far"]
    lone = contextual([far], {"far": scores["far"]}, params)["far"]
    assert got["far"] == pytest.approx(lone)  # nothing within reach: no context


def test_a_memory_from_no_session_is_a_session_of_one() -> None:
    """Context never penalises memories without provenance: alone, both score the same."""
    with_session = cand("a", 0.5, 4.0, session="s", turn=1)
    without = cand("b", 0.5, 4.0)
    scores = fused([with_session.relevance, without.relevance])
    got = contextual([with_session, without], scores, RankingParams())
    assert got["a"] == pytest.approx(got["b"])


def test_the_session_lifts_its_other_turns_but_not_over_a_clearly_better_match() -> None:
    hit = cand("hit", 0.7, 9.0, session="s", turn=1)
    same_session = cand("same", 0.3, 2.0, session="s", turn=30)
    other = cand("other", 0.32, 2.2, session="t", turn=30)
    got = [r.memory_id for r in rank([hit, same_session, other], NOW, 3, ALL)]
    assert got == ["hit", "same", "other"]
    best = cand("best", 0.9, 10.0, session="u", turn=1)
    assert rank([best, hit, same_session], NOW, 1)[0].memory_id == "best"


def test_context_comes_only_from_candidates_above_the_floor() -> None:
    junk = cand("junk", 0.05, 0.5, session="s", turn=4)  # below both floors
    answer = cand("answer", 0.3, 1.5, session="s", turn=5)
    other = cand("other", 0.3, 1.5, session="t", turn=5)
    got = rank([junk, answer, other], NOW, 3)
    assert [r.memory_id for r in got] == ["answer", "other"]
    assert got[0].score == pytest.approx(got[1].score)


@given(
    st.lists(
        st.tuples(
            st.floats(0.0, 1.0),
            st.floats(0.0, 20.0),
            st.sampled_from([None, "s", "t"]),
            st.one_of(st.none(), st.integers(0, 8)),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_contextual_scores_stay_within_0_and_1_and_never_drop_below_own_share(rows: list) -> None:
    params = RankingParams()
    cands = [cand(f"m{i}", c, b, session=s, turn=t) for i, (c, b, s, t) in enumerate(rows)]
    scores = fused([c.relevance for c in cands], params)
    got = contextual(cands, scores, params)
    scale = 1.0 + params.neighbour_weight * params.neighbour_window * (1 + params.previous_turn_factor)
    scale += params.session_weight
    for c in cands:
        mid = c.relevance.memory_id
        assert 0.0 <= got[mid] <= 1.0 + 1e-9
        assert got[mid] >= scores[mid] * (1.0 + params.session_weight) / scale - 1e-9


@pytest.mark.parametrize(
    ("query", "speaker", "named"),
    [
        ("What did Nate win last week?", "Nate", True),
        ("what did NATE win?", "nate", True),  # case does not matter
        ("What is Nate's favourite dessert?", "Nate", True),  # a possessive still names him
        ("What did the senate decide?", "Nate", False),  # whole words only
        ("What did Natelie paint?", "Nate", False),
        ("What did Mary Ann say about Paris?", "Mary Ann", True),
        ("What did Mary say about Paris?", "Mary Ann", False),  # every word of the speaker, in order
        ("What did Ann Mary say?", "Mary Ann", False),
        ("Where does Zoë live?", "zoë", True),  # casefolded beyond ASCII
        ("What did Nate win?", None, False),
        ("What did Nate win?", "", False),
        ("What did Nate win?", "?!", False),  # no word in it: never a match
    ],
)
def test_names_speaker_matches_whole_words_in_order(query: str, speaker: str | None, named: bool) -> None:
    assert names_speaker(query_words(query), speaker) is named


def test_what_the_named_person_said_outranks_an_equal_match_by_someone_else() -> None:
    """ "What did Nate win?": Nate's turn and Joanna's turn match alike; his is the one that answers."""
    joanna = cand("a-joanna", 0.5, 4.0, session="s", turn=3)
    nate = cand("b-nate", 0.5, 4.0, session="t", turn=8, named=True)
    assert [r.memory_id for r in rank([joanna, nate], NOW, 2)] == ["b-nate", "a-joanna"]
    off = RankingParams(speaker_weight=0.0, relative_floor=0.0)
    assert [r.memory_id for r in rank([joanna, nate], NOW, 2, off)] == ["a-joanna", "b-nate"]  # a tie, by id
    # ...but never over a clearly better match: the lift is bounded (1 + speaker_weight)
    strong = cand("c-strong", 0.9, 9.0, session="u", turn=1)
    weak_nate = cand("d-nate", 0.3, 1.2, session="v", turn=2, named=True)
    assert [r.memory_id for r in rank([weak_nate, strong], NOW, 2, ALL)] == ["c-strong", "d-nate"]


@given(
    st.lists(
        st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 20.0), st.booleans(), st.floats(0.0, 3.0)),
        min_size=1,
        max_size=12,
    )
)
def test_speaker_lift_keeps_relevance_within_0_and_1_and_only_reorders_by_the_lift(rows: list) -> None:
    cands = [cand(f"m{i}", c, b, named=n) for i, (c, b, n, _) in enumerate(rows)]
    weight = rows[0][3]
    params = RankingParams(speaker_weight=weight, relative_floor=0.0)
    lifted = {r.memory_id: r.relevance for r in rank(cands, NOW, len(cands), params)}
    flat = {
        r.memory_id: r.relevance for r in rank(cands, NOW, len(cands), ALL.model_copy(update={"speaker_weight": 0.0}))
    }
    assert lifted.keys() == flat.keys()
    for c in cands:
        mid = c.relevance.memory_id
        if mid not in lifted:
            continue
        assert 0.0 <= lifted[mid] <= 1.0 + 1e-9
        expected = flat[mid] if c.speaker_named else flat[mid] / (1.0 + weight)
        assert lifted[mid] == pytest.approx(expected)


# --- the relative floor -------------------------------------------------------------------------------


def test_the_relative_floor_drops_what_is_far_below_the_best_hit() -> None:
    """The demo's shape: one memory about the query, another that only shares a common word with it."""
    about = cand("fastapi", 0.62, 3.1)
    shares_a_word = cand("bangalore", 0.18, 1.1)
    assert [r.memory_id for r in rank([about, shares_a_word], NOW, 5)] == ["fastapi"]
    assert [r.memory_id for r in rank([about, shares_a_word], NOW, 5, ALL)] == ["fastapi", "bangalore"]


def test_the_relative_floor_keeps_hits_close_to_the_best() -> None:
    a, b, c = cand("a", 0.7, 6.0), cand("b", 0.6, 5.0), cand("c", 0.55, 4.5)
    assert [r.memory_id for r in rank([a, b, c], NOW, 5)] == ["a", "b", "c"]


def test_the_relative_floor_reads_relevance_not_recency_or_importance() -> None:
    """An old, unimportant memory as relevant as the best is kept; a new, important weak one is not."""
    best = cand("best", 0.7, 6.0)
    old = cand("old", 0.7, 6.0, age_days=3650, importance=0.0)
    weak_new = cand("weak", 0.2, 1.0, importance=1.0)
    assert [r.memory_id for r in rank([best, old, weak_new], NOW, 5)] == ["best", "old"]


@given(
    st.lists(st.tuples(st.floats(0.0, 1.0), st.floats(0.0, 20.0)), min_size=1, max_size=12),
    st.floats(0.0, 1.0),
)
def test_the_relative_floor_only_removes_the_tail(rows: list, share: float) -> None:
    cands = [cand(f"m{i}", c, b) for i, (c, b) in enumerate(rows)]
    floored = rank(cands, NOW, len(cands), RankingParams(relative_floor=share))
    everything = rank(cands, NOW, len(cands), ALL)
    kept = {r.memory_id for r in floored}
    assert [r for r in everything if r.memory_id in kept] == floored
    if everything:
        best = max(r.relevance for r in everything)
        assert all((r.relevance >= share * best) == (r.memory_id in kept) for r in everything)
        assert floored  # the best hit always passes its own floor
