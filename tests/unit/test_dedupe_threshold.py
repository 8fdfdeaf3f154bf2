"""Dedupe: the chosen threshold holds on both labelled sets with the real embedder, and its pure parts behave.

Two sets (`bench/dedupe_eval.py` prints their figures): `dedupe_pairs.jsonl`, on which the veto and the
threshold were tuned, and `dedupe_pairs_holdout.jsonl`, written before any tuning and never used to choose
anything. On each, the gate's rule must reach recall 0.80 at precision 0.98. Cosine alone never reaches
that precision on the tuning set; that is asserted too, so a change of model or of the veto that makes the
veto unnecessary (or insufficient) shows up here.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path

import pytest

from memwarden.embed import default_embedder
from memwarden.policy.dedupe import (
    DEDUPE_THRESHOLD,
    MAX_TOKENS,
    conflict_reasons,
    cosine,
    is_duplicate,
    value_conflict,
)

DATA = Path(__file__).resolve().parent.parent / "data"
PAIRS_FILE = DATA / "dedupe_pairs.jsonl"
HOLDOUT_FILE = DATA / "dedupe_pairs_holdout.jsonl"
MIN_PRECISION = 0.98
MIN_RECALL = 0.80
"""The issue's bar, on each set."""

KINDS = {"paraphrase", "different_value", "negation", "related", "unrelated"}
HOLDOUT_KINDS = {f"paraphrase_{k}" for k in ("reorder", "function_words", "synonym", "voice")} | {
    f"change_{k}" for k in ("number", "date", "entity", "negation", "antonym", "role", "tense")
}


def load_pairs(path: Path = PAIRS_FILE) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _score(path: Path) -> list[tuple[float, bool, bool]]:
    pairs = load_pairs(path)
    embedder = default_embedder()
    left = embedder.embed([str(p["a"]) for p in pairs])
    right = embedder.embed([str(p["b"]) for p in pairs])
    return [
        (cosine(a, b), value_conflict(str(p["a"]), str(p["b"])), bool(p["duplicate"]))
        for a, b, p in zip(left, right, pairs, strict=True)
    ]


@pytest.fixture(scope="module")
def scored() -> list[tuple[float, bool, bool]]:
    """(cosine, value_conflict, labelled duplicate) per tuning pair, with the real default embedder."""
    return _score(PAIRS_FILE)


@pytest.fixture(scope="module")
def scored_holdout() -> list[tuple[float, bool, bool]]:
    """The same for the held-out pairs."""
    return _score(HOLDOUT_FILE)


def precision_recall(predicted: list[bool], labels: list[bool]) -> tuple[float, float]:
    tp = sum(p and y for p, y in zip(predicted, labels, strict=True))
    fp = sum(p and not y for p, y in zip(predicted, labels, strict=True))
    fn = sum(y and not p for p, y in zip(predicted, labels, strict=True))
    return (tp / (tp + fp) if tp + fp else 1.0), (tp / (tp + fn) if tp + fn else 1.0)


def test_labelled_set_is_large_and_balanced() -> None:
    pairs = load_pairs()
    assert len(pairs) >= 150
    assert {p["kind"] for p in pairs} == KINDS
    assert all((p["kind"] == "paraphrase") == p["duplicate"] for p in pairs)
    assert sum(bool(p["duplicate"]) for p in pairs) >= 60
    assert sum(p["kind"] in ("different_value", "negation") for p in pairs) >= 60
    assert len({(p["a"], p["b"]) for p in pairs}) == len(pairs)


def test_holdout_set_covers_every_family() -> None:
    pairs = load_pairs(HOLDOUT_FILE)
    assert len(pairs) >= 100
    assert {p["kind"] for p in pairs} == HOLDOUT_KINDS
    assert all(str(p["kind"]).startswith("paraphrase_") == p["duplicate"] for p in pairs)
    assert all(sum(p["kind"] == kind for p in pairs) >= 10 for kind in HOLDOUT_KINDS)
    assert len({(p["a"], p["b"]) for p in pairs}) == len(pairs)
    tuning = {(p["a"], p["b"]) for p in load_pairs()}
    assert not tuning & {(p["a"], p["b"]) for p in pairs}, "a held-out pair is also a tuning pair"


@pytest.mark.parametrize("which", ["tuning", "holdout"])
def test_threshold_precision_and_recall_on_each_set(
    which: str, scored: list[tuple[float, bool, bool]], scored_holdout: list[tuple[float, bool, bool]]
) -> None:
    rows = scored if which == "tuning" else scored_holdout
    labels = [dup for _, _, dup in rows]
    predicted = [is_duplicate(sim, value_conflict=conflict) for sim, conflict, _ in rows]
    precision, recall = precision_recall(predicted, labels)
    assert precision >= MIN_PRECISION, f"{which}: precision {precision:.3f}"
    assert recall >= MIN_RECALL, f"{which}: recall {recall:.3f}"


def test_cosine_alone_is_not_precise_enough(scored: list[tuple[float, bool, bool]]) -> None:
    """Why the veto exists: a changed value in a long sentence scores higher than most paraphrases."""
    labels = [dup for _, _, dup in scored]
    for step in range(50, 100):
        threshold = step / 100
        predicted = [is_duplicate(sim, threshold=threshold) for sim, _, _ in scored]
        precision, _ = precision_recall(predicted, labels)
        assert precision < MIN_PRECISION, f"cosine alone reaches {precision:.3f} at {threshold}"


def test_no_labelled_value_change_is_called_a_duplicate_above_the_threshold(
    scored: list[tuple[float, bool, bool]], scored_holdout: list[tuple[float, bool, bool]]
) -> None:
    rows = scored + scored_holdout
    false_duplicates = [sim for sim, conflict, dup in rows if not dup and is_duplicate(sim, value_conflict=conflict)]
    assert false_duplicates == []


def test_the_issues_paraphrases_are_duplicates() -> None:
    """The write-gate demo's three cases: each pair is close enough and no value differs."""
    pairs = [
        ("User builds backends with Python and FastAPI", "User builds backends in Python with FastAPI"),
        ("The user lives in Bangalore", "The user is based in Bangalore"),
        ("Tom works as a nurse at the city hospital", "Tom is a nurse at the city hospital"),
    ]
    embedder = default_embedder()
    for a, b in pairs:
        va, vb = embedder.embed([a, b])
        assert is_duplicate(cosine(va, vb), value_conflict=value_conflict(a, b)), (a, b)


# --- the pure parts -------------------------------------------------------------------------------------


def test_cosine() -> None:
    assert cosine([1.0, 0.0], [1.0, 0.0]) == 1.0
    assert cosine([1.0, 0.0], [0.0, 2.0]) == 0.0
    assert math.isclose(cosine([1.0, 1.0], [-1.0, -1.0]), -1.0)
    assert math.isclose(cosine([3.0, 4.0], [4.0, 3.0]), 24 / 25)
    assert cosine([0.0, 0.0], [1.0, 0.0]) == 0.0
    with pytest.raises(ValueError, match="lengths differ"):
        cosine([1.0], [1.0, 0.0])


def test_pure_cosine_matches_the_embedder_space() -> None:
    a, b = default_embedder().embed(["I live in Berlin", "My home city is Berlin"])
    dot = sum(x * y for x, y in zip(a, b, strict=True))  # unit vectors: cosine is the dot product
    assert math.isclose(cosine(a, b), dot, abs_tol=1e-6)


def test_is_duplicate_boundary_and_veto() -> None:
    assert is_duplicate(DEDUPE_THRESHOLD)
    assert not is_duplicate(DEDUPE_THRESHOLD - 1e-9)
    assert not is_duplicate(1.0, value_conflict=True)
    assert is_duplicate(0.5, threshold=0.5)
    assert 0.7 <= DEDUPE_THRESHOLD < 1.0


@pytest.mark.parametrize(
    ("a", "b", "conflict"),
    [
        pytest.param("I prefer tea", "I prefer tea.", False, id="punctuation"),
        pytest.param("User prefers dark mode", "The user prefers dark mode", False, id="article"),
        pytest.param("My favourite colour is blue", "my favorite color is blue", False, id="spelling"),
        pytest.param("I play tennis on weekends", "On weekends I play tennis", False, id="moved phrase"),
        pytest.param("I'm allergic to cats", "I am allergic to cats", False, id="contraction"),
        pytest.param("I have two cats", "I have 2 cats", False, id="number word"),
        pytest.param("I don't like spicy food", "I dislike spicy food", False, id="same polarity"),
        pytest.param("I live in Berlin", "My home city is Berlin", False, id="restructured: the embedding judges"),
        pytest.param("I like coffee", "I don't like coffee", True, id="negation"),
        pytest.param("I enjoy flying", "I hate flying", True, id="negative verb"),
        pytest.param("I drink alcohol", "I avoid alcohol", True, id="avoid"),
        pytest.param("Always CC my assistant", "Never CC my assistant", True, id="never"),
        pytest.param("I have two cats", "I have three cats", True, id="count"),
        pytest.param("Flight departs at 7:40", "Flight departs at 9:15", True, id="time"),
        pytest.param("Report every Monday morning", "Report every Friday morning", True, id="one-word edit"),
        pytest.param("I need a vegetarian meal", "I need a vegan meal", True, id="lowercase value"),
        pytest.param("Training for the marathon", "Training for the half marathon", True, id="added qualifier"),
        pytest.param("Migrating from MySQL to PostgreSQL", "Migrating from PostgreSQL to MySQL", True, id="swap"),
        pytest.param("", "", False, id="empty"),
        pytest.param(
            "User builds backends with Python and FastAPI",
            "User builds backends in Python with FastAPI",
            False,
            id="function words",
        ),
        pytest.param("The user lives in Bangalore", "The user is based in Bangalore", False, id="a home"),
        pytest.param(
            "Tom works as a nurse at the city hospital", "Tom is a nurse at the city hospital", False, id="as"
        ),
        pytest.param(
            "User completed the onboarding tutorial", "The user finished the onboarding tutorial", False, id="synonym"
        ),
        pytest.param(
            "The user's car was repaired by the dealership", "The dealership repaired the user's car", False, id="voice"
        ),
        pytest.param("The user's birthday is 14 February", "The user was born on 14 February", False, id="birthday"),
        pytest.param("The user lives in Bangalore", "The user lived in Bangalore", True, id="tense"),
        pytest.param("The user will move to Berlin", "The user moved to Berlin", True, id="future vs past"),
        pytest.param("The user smokes", "The user used to smoke", True, id="used to"),
        pytest.param("Anna reports to the user", "The user reports to Anna", True, id="subject and object swapped"),
        pytest.param("The user was hired by Stripe", "The user hired Stripe", True, id="passive undone: roles differ"),
        pytest.param("The user prefers early flights", "The user prefers late flights", True, id="antonym"),
        pytest.param("The user arrives before the meeting", "The user arrives after the meeting", True, id="opposite"),
        pytest.param("The user works at Google", "The user works at Amazon", True, id="entity"),
        pytest.param("I'm allergic to peanuts", "My son is allergic to peanuts", True, id="someone else"),
        pytest.param("The user is a teacher", "The user is a former teacher", True, id="former"),
        pytest.param("I am learning Japanese", "I am teaching Japanese", True, id="rare shared sense ignored"),
        pytest.param("My favourite colour is blue", "My favourite colour is green", True, id="co-satellites differ"),
        pytest.param("I live in Berlin", "I live in Berlin, Germany", False, id="added detail"),
        pytest.param("I take the bus on Monday", "I take the bus on Monday mornings", False, id="added time detail"),
        pytest.param("I take the bus on Monday", "I take the bus on Friday", True, id="replaced time"),
    ],
)
def test_value_conflict(a: str, b: str, conflict: bool) -> None:
    assert value_conflict(a, b) is conflict
    assert value_conflict(b, a) is conflict


def test_conflict_reasons_name_the_rule() -> None:
    assert conflict_reasons("I have two cats", "I have three cats") == ["number"]
    assert conflict_reasons("I like coffee", "I don't like coffee") == ["polarity"]
    assert "role" in conflict_reasons("Migrating from MySQL to PostgreSQL", "Migrating from PostgreSQL to MySQL")
    assert conflict_reasons("The user is a vegetarian", "The user was a vegetarian") == ["tense"]
    assert conflict_reasons("I prefer tea", "I prefer tea") == []


def test_long_texts_are_compared_only_for_equality() -> None:
    """Past MAX_TOKENS words the pairwise checks would be quadratic: a near-copy is never a duplicate."""
    long = " ".join(["the user likes green tea"] * (MAX_TOKENS // 4))
    assert value_conflict(long, long) is False
    assert conflict_reasons(long, long + " daily") == ["length"]


@pytest.mark.parametrize(
    "text",
    ["\n" * 4095, "a " * 2047, "a-" * 2047, "1," * 2047, "a'" * 2047, "word " * 819, "." * 4095],
    ids=["newlines", "spaces", "hyphens", "commas", "apostrophes", "words", "dots"],
)
def test_value_conflict_is_fast_on_adversarial_text(text: str) -> None:
    value_conflict("warm", "up")  # the table is loaded once, outside the timing
    # This thread's CPU, not wall time: ~10-20 ms here, and a box shared with other work stretched wall
    # time past a second while the veto's own cost stayed the same (a super-linear veto would not).
    start = time.thread_time()
    value_conflict(text, text[:-2] + "xy")
    assert time.thread_time() - start < 0.2


def test_wordnet_table_relations() -> None:
    """The shipped table says what WordNet says: synonyms share a frequent sense; antonyms are marked."""
    assert not value_conflict("I bought a bike", "I purchased a bike")
    assert not value_conflict("The apartment is big", "The apartment is large")
    assert value_conflict("I bought a bike", "I sold a bike")
    assert value_conflict("The user is early", "The user is late")
