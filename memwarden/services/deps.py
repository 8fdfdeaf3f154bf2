"""What a service works with: the stores opened once per worker process, the clock and the id source.

The clock and the id factory are injected, not read from the system: a service's timestamps and
fallback ids are then whatever its caller says (the worker: the system clock and uuid4; a
test: a fixed instant and a counter), and nothing in a service reaches for global state.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from memwarden.config import Settings
from memwarden.embed import Embedder
from memwarden.stores.cache import Cache
from memwarden.stores.replicas import ReplicaStore
from memwarden.stores.sources import SourceRegistry
from memwarden.stores.sql import SqlStore
from memwarden.stores.summaries import ExtractiveSummarizer, Summarizer
from memwarden.stores.vectors import VectorIndex


def system_clock() -> datetime:
    """Now, timezone-aware in UTC (every stored time is)."""
    return datetime.now(UTC)


def random_id() -> str:
    """A random uuid4."""
    return str(uuid.uuid4())


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
    clock: Callable[[], datetime] = system_clock
    """Every time a service stamps (created, confirmed, audited, expires) is read from here."""
    new_id: Callable[[], str] = random_id
    """Ids a service makes up itself (a run id when no workflow run names one)."""
