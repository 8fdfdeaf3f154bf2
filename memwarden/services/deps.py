"""The stores an activity needs, opened once per worker process."""

from __future__ import annotations

from dataclasses import dataclass, field

from memwarden.config import Settings
from memwarden.embed import Embedder
from memwarden.stores.cache import Cache
from memwarden.stores.replicas import ReplicaStore
from memwarden.stores.sources import SourceRegistry
from memwarden.stores.sql import SqlStore
from memwarden.stores.summaries import ExtractiveSummarizer, Summarizer
from memwarden.stores.vectors import VectorIndex


@dataclass
class Deps:
    settings: Settings
    store: SqlStore
    index: VectorIndex
    cache: Cache
    embedder: Embedder
    replicas: list[ReplicaStore] = field(default_factory=list)
    summarizer: Summarizer = field(default_factory=ExtractiveSummarizer)
    sources: SourceRegistry = field(default_factory=lambda: SourceRegistry([]))
    """Systems of record (sources.toml): revalidation's connectors."""
