"""Open the stores once per worker process and build the Temporal worker over them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

from temporalio.client import Client
from temporalio.worker import Worker

from activities.conversation import ConversationActivities
from activities.forget import ForgetActivities
from activities.imports import ImportActivities
from activities.memory import MemoryActivities
from activities.remediation import RemediationActivities
from activities.remember import RememberActivities
from activities.replicas import ReplicaActivities
from activities.retention import RetentionActivities
from activities.revalidate import RevalidateActivities
from activities.summaries import SummaryActivities
from memwarden import detect
from memwarden.audit_heads import CheckpointTimer, audit_heads
from memwarden.config import Settings
from memwarden.embed import Embedder, default_embedder
from memwarden.services.deps import Deps
from memwarden.services.indexing import adopt_embedder, reconcile_index
from memwarden.stores.cache import open_cache
from memwarden.stores.forget import ForgetStore
from memwarden.stores.replicas import ReplicaStore
from memwarden.stores.sources import SourceRegistry
from memwarden.stores.sql import open_store
from memwarden.stores.vector_backends import open_index
from memwarden.stores.vectors_edge import EdgeIndex
from memwarden.temporal.sandbox import SANDBOX
from workflows.registry import ALL_WORKFLOWS

logger = logging.getLogger(__name__)

MAX_CONCURRENT_LOCAL_ACTIVITIES = 32
"""Per worker; benches give their Temporal floor the same limit, so the floor runs as the real worker does."""


@asynccontextmanager
async def open_deps(settings: Settings, *, embedder: Embedder | None = None) -> AsyncIterator[Deps]:
    """Migrate the store, open the index and cache; close them all on exit."""
    store = await open_store(settings)
    await store.migrate()
    await ForgetStore(store).scrub_purged()  # tombstones purged before they were scrubbed (a no-op after)
    index = open_index(settings)
    await index.ensure()
    emb = embedder or await asyncio.to_thread(default_embedder)
    # An index built by another embedder is rebuilt from the store before the worker serves from it.
    rebuilt = await adopt_embedder(store, index, emb)
    if rebuilt:
        logger.info("index rebuilt for embedder %s: %d memories re-embedded", emb.model_id, rebuilt)
    elif isinstance(index, EdgeIndex) and (since := index.flushed_through) is not None:
        # Writes after the shard's last group flush may be lost in a crash: catch up from the store.
        await reconcile_index(store, index, emb, since)
    cache = open_cache(settings)
    # Build the detectors now (~1.5 s), so the first proposal does not pay for it.
    await asyncio.to_thread(detect.warm_up)
    replicas = [await ReplicaStore.open(url) for url in settings.replica_urls]
    sources = SourceRegistry.from_file(settings.sources_path)
    deps = Deps(
        settings=settings,
        store=store,
        index=index,
        cache=cache,
        embedder=emb,
        replicas=replicas,
        sources=sources,
    )
    # Sign the audit head on a timer too, and publish every signed head outside the database.
    timer = CheckpointTimer(store, audit_heads(settings), settings.audit_checkpoint_seconds)
    await timer.start()
    try:
        yield deps
    finally:
        await timer.stop()
        await sources.close()
        for replica in replicas:
            await replica.close()
        await cache.close()
        await index.close()
        await store.close()


def build_worker(client: Client, deps: Deps) -> Worker:
    remember = RememberActivities(deps)  # one gate (and its vector cache) for single writes and imports
    activities = [
        *MemoryActivities(deps).all(),
        *remember.all(),
        *ImportActivities(deps, remember).all(),
        *ConversationActivities(deps).all(),
        *ForgetActivities(deps).all(),
        *SummaryActivities(deps).all(),
        *ReplicaActivities(deps).all(),
        *RetentionActivities(deps).all(),
        *RevalidateActivities(deps).all(),
        *RemediationActivities(deps).all(),
    ]
    return Worker(
        client,
        task_queue=deps.settings.temporal_task_queue,
        workflows=ALL_WORKFLOWS,
        activities=activities,
        workflow_runner=SANDBOX,
        max_concurrent_local_activities=MAX_CONCURRENT_LOCAL_ACTIVITIES,
        # A stopping worker (SIGTERM, a rollout) lets in-flight activities finish instead of cancelling them.
        graceful_shutdown_timeout=timedelta(seconds=deps.settings.worker_shutdown_grace_seconds),
    )
