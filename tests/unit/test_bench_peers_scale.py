"""The pure parts of bench/peers_scale.py: which texts get a pool vector, the load plan, the projection and the
published rows. No peer is installed or run here (bench/peer_systems.py is never imported)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from bench import peers_scale


def _fake_model(calls: list[list[str]]) -> Callable[[list[str]], list[list[float]]]:
    def embed(texts: list[str]) -> list[list[float]]:
        calls.append(list(texts))
        return [[float(len(t)), 1.0, 0.0, 0.0] for t in texts]

    return embed


def test_a_bulk_text_gets_its_pool_sentences_vector_with_the_same_noise_every_time() -> None:
    calls: list[list[str]] = []
    pool = ["alice booked a table", "bob moved to porto"]
    emb = peers_scale.PoolEmbeddings(_fake_model(calls), pool)
    assert calls == [pool]  # the pool is embedded once, up front
    text = peers_scale.synthetic_text(pool, 7)
    assert text == "bob moved to porto (note 7)"  # bench/synthetic.py's own tag
    first, again = emb.embed_query(text), emb.embed_documents([text])[0]
    assert first == again and calls == [pool]  # no model call for bulk text, and deterministic
    assert abs(float(np.linalg.norm(first)) - 1.0) < 1e-5
    base = np.asarray([18.0, 1.0, 0.0, 0.0]) / np.linalg.norm([18.0, 1.0, 0.0, 0.0])
    assert float(np.dot(first, base)) > 0.99  # the pool sentence's direction, a little noise
    assert emb.embed_query(peers_scale.synthetic_text(pool, 9)) != first  # each memory its own noise


def test_anything_that_is_not_exactly_a_tagged_pool_sentence_goes_through_the_model_in_order() -> None:
    calls: list[list[str]] = []
    pool = ["alice booked a table"]
    emb = peers_scale.PoolEmbeddings(_fake_model(calls), pool)
    texts = ["where did alice eat?", peers_scale.synthetic_text(pool, 3), "alice booked a table", "x (note 3)"]
    out = emb.embed_documents(texts)
    assert calls[1:] == [["where did alice eat?", "alice booked a table", "x (note 3)"]]
    assert out[0] == [20.0, 1.0, 0.0, 0.0] and out[2] == [20.0, 1.0, 0.0, 0.0] and out[3] == [10.0, 1.0, 0.0, 0.0]


def test_the_plan_counts_the_owners_memories_in_each_size_and_refuses_a_size_they_fill() -> None:
    assert peers_scale.plan([100_000, 10_000], 681) == [9_319, 99_319]
    with pytest.raises(ValueError, match="does not exceed"):
        peers_scale.plan([500], 681)


def test_a_step_is_projected_at_the_rate_of_its_first_chunk() -> None:
    assert peers_scale.projected_s(2_000, 10.0, 90_000) == 450.0


def test_a_size_not_loaded_says_its_rate_and_how_long_it_would_have_taken() -> None:
    result = {
        "python_loop_ms": 55.0,
        "conversation": 7,
        "runs": {
            "mem0-faiss": {
                "system": "mem0, faiss",
                "notes": ["dense only"],
                "rows": [
                    {
                        "size": 10_000,
                        "loaded": True,
                        "rate_per_s": 30.5,
                        "rss_mb": 500.0,
                        "search": {"p50": 7.1, "p95": 9.0},
                        "R@5": 0.4,
                    },
                    {"size": 100_000, "loaded": False, "rate_per_s": 12.0, "projected_step_s": 7_200.0},
                    {"size": 1_000_000, "loaded": False, "rate_per_s": 11.0, "projected_step_s": 254.5},
                ],
            }
        },
    }
    text = peers_scale.markdown(result)
    assert "| mem0, faiss | 10,000 | 30.5 | 500.0 | 7.1 / 9.0 | 0.4 |" in text
    assert "| mem0, faiss | 100,000 | 12.0 (not loaded: the step would take 2.0 h) |" in text
    assert "| mem0, faiss | 1,000,000 | 11.0 (not loaded: the step would take 4 min) |" in text
    assert "mem0, faiss: dense only." in text
