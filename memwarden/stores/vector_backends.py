"""Picks the vector index the settings describe.

Apart from the contract (`memwarden.stores.vectors`) so that the backends import the contract alone.
"""

from __future__ import annotations

from memwarden.config import Settings, VectorBackend
from memwarden.stores.vectors import IndexUnavailable, VectorIndex


def open_index(settings: Settings) -> VectorIndex:
    """The index the settings describe: Qdrant Edge at `edge_path`, or a Qdrant server / local mode."""
    if settings.vector_backend is VectorBackend.EDGE:
        from memwarden.stores.vectors_edge import EdgeIndex

        return EdgeIndex(settings.edge_path, flush_delay=settings.edge_flush_delay_seconds)

    from qdrant_client import AsyncQdrantClient

    from memwarden.stores.vectors_qdrant import QdrantClientIndex

    if settings.qdrant_url:
        client = AsyncQdrantClient(url=settings.qdrant_url, api_key=settings.qdrant_api_key)
    elif settings.qdrant_location == ":memory:":
        client = AsyncQdrantClient(location=":memory:")
    elif settings.qdrant_location:
        client = AsyncQdrantClient(path=settings.qdrant_location)
    else:
        raise IndexUnavailable("the qdrant backend needs MEMWARDEN_QDRANT_URL or MEMWARDEN_QDRANT_LOCATION")
    return QdrantClientIndex(
        client,
        settings.qdrant_collection,
        shard_number=settings.qdrant_shard_number,
        replication_factor=settings.qdrant_replication_factor,
    )
