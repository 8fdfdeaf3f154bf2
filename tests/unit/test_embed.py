"""The offline embedder: meaning-preserving, deterministic, batch-invariant, integrity-checked."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from onnx import helper

from bench.worker_cpu import Fp32Products
from memwarden import embed
from memwarden.embed import Embedder, MiniLMEmbedder, ModelIntegrityError, default_embedder


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return default_embedder()


def _cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_vectors_are_384_dim_and_unit_length(embedder: MiniLMEmbedder) -> None:
    vectors = embedder.embed(["I live in Berlin", "", "ok"])
    assert embedder.dim == 384
    assert isinstance(embedder, Embedder)
    assert [len(v) for v in vectors] == [384, 384, 384]
    assert np.allclose(np.linalg.norm(np.asarray(vectors), axis=1), 1.0, atol=1e-5)


def test_paraphrase_is_closer_than_unrelated_text(embedder: MiniLMEmbedder) -> None:
    berlin, home, invoice = embedder.embed(["I live in Berlin", "My home city is Berlin", "The invoice is overdue"])
    assert _cos(berlin, home) > 0.6
    assert _cos(berlin, invoice) < 0.3
    assert _cos(berlin, home) - _cos(berlin, invoice) > 0.4


def test_embedding_is_deterministic(embedder: MiniLMEmbedder) -> None:
    texts = ["prefers window seats", "allergic to peanuts"]
    assert embedder.embed(texts) == embedder.embed(texts)


def test_a_texts_vector_does_not_depend_on_its_neighbours(embedder: MiniLMEmbedder) -> None:
    texts = [
        "short",
        "a much longer sentence about the weather in the mountains this weekend, with rain expected",
        "My home city is Berlin",
    ]
    together = embedder.embed(texts)
    assert [embedder.embed([t])[0] for t in texts] == together
    assert embedder.embed(list(reversed(texts))) == list(reversed(together))
    assert embedder.embed([]) == []


def test_the_int8_products_keep_the_fp32_products_meaning(embedder: MiniLMEmbedder) -> None:
    """Close to the same weights multiplied in fp32 (the file as onnxruntime alone runs it), yet not them."""
    texts = ["I live in Berlin", "prefers window seats on long flights", "The invoice is overdue"]
    for vector, reference in zip(embedder.embed(texts), Fp32Products().embed(texts), strict=True):
        assert 0.998 < _cos(vector, reference) < 0.99999


def test_a_model_without_the_expected_int8_projections_is_refused() -> None:
    empty = helper.make_model(helper.make_graph([], "empty", [], []))
    with pytest.raises(ModelIntegrityError, match="0 int8 projections"):
        embed.int8_matmuls(empty.SerializeToString())


def test_long_input_is_truncated_not_rejected(embedder: MiniLMEmbedder) -> None:
    long_text = "Berlin " * 2000
    (vector,) = embedder.embed([long_text])
    (prefix,) = embedder.embed(["Berlin " * 400])  # both exceed 256 word pieces: same truncated input
    assert np.allclose(vector, prefix, atol=1e-5)


def test_concurrent_use_gives_the_same_vectors(embedder: MiniLMEmbedder) -> None:
    texts = [f"memory {i}: likes tea" for i in range(16)]
    expected = embedder.embed(texts)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda t: embedder.embed([t])[0], texts))
    assert np.allclose(np.asarray(results), np.asarray(expected), atol=1e-5)


def test_default_embedder_is_cached() -> None:
    assert default_embedder() is default_embedder()


def test_model_with_unexpected_hash_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed, "MODEL_SHA256", "0" * 64)
    with pytest.raises(ModelIntegrityError, match="does not match the pinned"):
        MiniLMEmbedder()


def test_tokenizer_with_unexpected_hash_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embed, "TOKENIZER_SHA256", "f" * 64)
    with pytest.raises(ModelIntegrityError, match=r"tokenizer\.json"):
        MiniLMEmbedder()


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(ValueError):
        MiniLMEmbedder(intra_op_threads=0)
