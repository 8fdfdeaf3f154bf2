"""The in-process peers of bench/peers.py, each as its own library is meant to be used, on memwarden's embedder.

Imported only by bench/peers.py and bench/peers_scale.py at run time: it needs the bench's `peers` extra
(`pip install -e '.[peers]'`), never installed with the service or its tests.

- LangGraph `InMemoryStore` and `langgraph-store-qdrant`'s `QdrantStore` (a LangGraph `BaseStore` by the
  Qdrant team, here on qdrant-client's local mode, in a directory): items under `("memories", owner)`,
  the value `{"text": ..., session, turn, speaker}`, only `text` embedded; search by namespace.
- mem0 (`Memory`) on Qdrant local mode and on FAISS: `add(text, user_id=owner, infer=False, metadata=...)`
  (stored as said, no LLM), `search(query, filters={"user_id": owner}, top_k=k)` with mem0's defaults.
- an exact FAISS index used directly (`FaissFlat`, bench/peers_scale.py only): what "an in-process exact
  FAISS index" costs at a size mem0's FAISS store cannot be loaded to (it saves the whole index on every add).

Every peer embeds with the same model object memwarden's worker loads (`memwarden.embed`): LangGraph
takes it as a LangChain `Embeddings`, mem0 through its own `langchain` embedder provider. mem0 also
insists on an LLM configuration: it gets `NoLLM`, a chat model that raises if anything calls it.
Nothing here reaches the network: mem0's telemetry is switched off before mem0 is imported, and so is
its spaCy model download (mem0 then runs as it does whenever that model is missing).
"""

from __future__ import annotations

import os
import threading
import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

os.environ["MEM0_TELEMETRY"] = "false"  # read once, when mem0 is imported: no events to PostHog

from langchain_core.embeddings import Embeddings
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult

from memwarden.embed import DIM, Embedder, default_embedder


class SharedEmbeddings(Embeddings):
    """memwarden's embedder (all-MiniLM-L6-v2 int8, the very model object) as a LangChain `Embeddings`:
    what LangGraph's stores and mem0's `langchain` provider accept, so every system ranks the same vectors."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embedder.embed(list(texts))

    def embed_query(self, text: str) -> list[float]:
        return self.embedder.embed([text])[0]


class NoLLM(BaseChatModel):
    """A chat model that raises when called. mem0 builds an LLM from its configuration even when every
    write is `infer=False`; this one makes sure no model is ever asked anything."""

    @property
    def _llm_type(self) -> str:
        return "peers-bench-no-llm"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, **kwargs: Any) -> ChatResult:
        raise RuntimeError("the peers bench runs mem0 with infer=False: no LLM may be called")


class Peer(ABC):
    """One system behind the bench's three calls. `add` and `search` are synchronous, as the libraries are."""

    name: str
    notes: list[str]

    @abstractmethod
    def add(self, owner: str, key: str, text: str, meta: dict[str, str]) -> str:
        """Store one memory of `owner`; the id its search returns for it."""

    @abstractmethod
    def search(self, owner: str, query: str, k: int) -> list[str]:
        """The ids of `owner`'s k best memories for `query`, best first."""

    def close(self) -> None:  # noqa: B027 (a default: most peers hold nothing to release)
        """Release files and clients."""


class LangGraphStore(Peer):
    """A LangGraph `BaseStore` with semantic search over the value's `text`."""

    def __init__(self, name: str, store: Any, closer: Callable[[], None] = lambda: None) -> None:
        self.name = name
        self.store = store
        self._closer = closer
        self.notes = []

    def add(self, owner: str, key: str, text: str, meta: dict[str, str]) -> str:
        self.store.put(("memories", owner), key, {"text": text, **meta})
        return key

    def search(self, owner: str, query: str, k: int) -> list[str]:
        return [item.key for item in self.store.search(("memories", owner), query=query, limit=k)]

    def close(self) -> None:
        self._closer()


def langgraph_in_memory(embeddings: SharedEmbeddings) -> LangGraphStore:
    from langgraph.store.memory import InMemoryStore

    return LangGraphStore(
        "LangGraph InMemoryStore",
        InMemoryStore(index={"embed": embeddings, "dims": DIM, "fields": ["text"]}),
    )


def langgraph_qdrant(embeddings: SharedEmbeddings, where: Path) -> LangGraphStore:
    from langgraph.store.qdrant import QdrantStore
    from qdrant_client import QdrantClient

    client = QdrantClient(path=str(where))
    store = QdrantStore(client, index={"embed": embeddings, "dims": DIM, "fields": ["text"]})
    store.setup()
    peer = LangGraphStore("LangGraph QdrantStore, qdrant local", store, client.close)
    peer.notes.append("langgraph-store-qdrant on qdrant-client's local mode (no Qdrant server runs here)")
    return peer


def _no_spacy_download() -> None:
    """mem0 lemmatizes for BM25 and extracts entities with spaCy's en_core_web_sm, which it downloads from
    GitHub on first use when spaCy is installed (presidio brings spaCy; no package brings the model).
    Offline that download fails and mem0 carries on without the model; marking it as failed up front is
    the same state without the attempt."""
    from mem0.utils import spacy_models

    spacy_models._load_failed_full = True
    spacy_models._load_failed_lemma = True


class Mem0(Peer):
    """mem0's `Memory` (open source, in this process) on one vector store, writes with `infer=False`."""

    def __init__(self, name: str, embeddings: SharedEmbeddings, provider: str, config: dict[str, Any], where: Path):
        from mem0 import Memory

        _no_spacy_download()
        self.name = name
        self.memory = Memory.from_config(
            {
                "embedder": {"provider": "langchain", "config": {"model": embeddings, "embedding_dims": DIM}},
                "llm": {"provider": "langchain", "config": {"model": NoLLM()}},
                "vector_store": {"provider": provider, "config": {**config, "embedding_model_dims": DIM}},
                "history_db_path": str(where / "history.db"),
            }
        )
        self.notes = []
        store = self.memory.vector_store
        if provider == "qdrant" and store._get_bm25_encoder() is None:
            self.notes.append(
                "BM25 keyword scoring off: mem0 encodes it with fastembed's Qdrant/bm25 model, fetched from "
                "the Hugging Face Hub at run time (not reachable here); search is mem0's dense ranking"
            )
        if provider == "faiss":
            self.notes.append("mem0's FAISS store has no keyword search: search is mem0's dense ranking")

    def add(self, owner: str, key: str, text: str, meta: dict[str, str]) -> str:
        out = self.memory.add(text, user_id=owner, infer=False, metadata={"key": key, **meta})
        return str(out["results"][0]["id"])

    def search(self, owner: str, query: str, k: int) -> list[str]:
        found = self.memory.search(query, filters={"user_id": owner}, top_k=k)
        return [str(r["id"]) for r in found["results"]]

    def close(self) -> None:
        self.memory.close()


def mem0_qdrant(embeddings: SharedEmbeddings, where: Path) -> Mem0:
    where.mkdir(parents=True, exist_ok=True)
    config = {"path": str(where / "qdrant"), "collection_name": "memories"}
    return Mem0("mem0, qdrant local", embeddings, "qdrant", config, where)


def mem0_faiss(embeddings: SharedEmbeddings, where: Path) -> Mem0:
    where.mkdir(parents=True, exist_ok=True)
    config = {"path": str(where / "faiss"), "collection_name": "memories", "distance_strategy": "cosine"}
    return Mem0("mem0, faiss", embeddings, "faiss", config, where)


class FaissFlat(Peer):
    """An exact FAISS index used directly (`IndexIDMap2` over `IndexFlatIP` on unit vectors), one owner's
    search restricted to that owner's ids inside the scan (`IDSelectorBatch`): the in-process exact index
    issue 26 measures against, without mem0's store around it (which saves the whole index on every add)."""

    def __init__(self, embeddings: Embeddings) -> None:
        import faiss

        self.name = "FAISS exact index (IndexFlatIP, direct)"
        self.notes = ["faiss-cpu used directly: each owner's ids kept beside it, a search filtered by IDSelectorBatch"]
        self._faiss = faiss
        self._embeddings = embeddings
        self._index = faiss.IndexIDMap2(faiss.IndexFlatIP(DIM))
        self._owners: dict[str, list[int]] = {}
        self._keys: list[str] = []

    def add(self, owner: str, key: str, text: str, meta: dict[str, str]) -> str:
        vector = np.asarray([self._embeddings.embed_documents([text])[0]], dtype=np.float32)
        n = len(self._keys)
        self._index.add_with_ids(vector, np.asarray([n], dtype=np.int64))
        self._keys.append(key)
        self._owners.setdefault(owner, []).append(n)
        return key

    def search(self, owner: str, query: str, k: int) -> list[str]:
        ids = self._owners.get(owner)
        if not ids:
            return []
        selector = self._faiss.IDSelectorBatch(np.asarray(ids, dtype=np.int64))
        q = np.asarray([self._embeddings.embed_query(query)], dtype=np.float32)
        _, found = self._index.search(q, k, params=self._faiss.SearchParameters(sel=selector))
        return [self._keys[i] for i in found[0] if i >= 0]


BUILDERS: dict[str, Callable[[SharedEmbeddings, Path], Peer]] = {
    "langgraph-memory": lambda e, _: langgraph_in_memory(e),
    "langgraph-qdrant": lambda e, where: langgraph_qdrant(e, where / "langgraph-qdrant"),
    "mem0-qdrant": lambda e, where: mem0_qdrant(e, where / "mem0-qdrant"),
    "mem0-faiss": lambda e, where: mem0_faiss(e, where / "mem0-faiss"),
    "faiss-flat": lambda e, _: FaissFlat(e),
}
"""Every in-process peer by its `--systems` name."""


def build(names: list[str], where: Path) -> list[Peer]:
    """The named peers, each with files of its own under `where`, all on memwarden's default embedder."""
    embeddings = SharedEmbeddings(default_embedder())
    return [BUILDERS[name](embeddings, where) for name in names]


def run_threads(clients: int, per_client: int, call: Callable[[int, int], object]) -> tuple[float, Counter[str]]:
    """`clients` threads calling `call(client, n)` per_client times each, all started together: wall seconds
    and the calls that raised, by exception (type and first line). Threads, because the peers' APIs are
    synchronous (mem0's AsyncMemory runs the same calls in threads too); they share one GIL, as they would
    in an agent's process."""
    errors: Counter[str] = Counter()
    lock = threading.Lock()

    def client(i: int) -> None:
        for n in range(per_client):
            try:
                call(i, n)
            except Exception as error:
                with lock:
                    errors[f"{type(error).__name__}: {str(error).splitlines()[0][:160] if str(error) else ''}"] += 1

    with ThreadPoolExecutor(max_workers=clients) as pool:
        start = time.perf_counter()
        list(pool.map(client, range(clients)))
        elapsed = time.perf_counter() - start
    return elapsed, errors
