"""Fixtures: one embedded stack per test module that asks for `api` (module scope), and an empty vector
index on each engine for the tests that ask for `index`."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from qdrant_client import AsyncQdrantClient

from memwarden.stores.vectors import VectorIndex
from memwarden.stores.vectors_edge import EdgeIndex
from memwarden.stores.vectors_qdrant import QdrantClientIndex
from tests.integration.api_stack import Api, embedded_api


@pytest.fixture(scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    async with embedded_api(tmp_path_factory.mktemp("api")) as stack:
        yield stack


@pytest.fixture
async def http(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=api.base_url, timeout=60) as client:
        yield client


@pytest.fixture(params=["edge", "qdrant"])
async def index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorIndex]:
    """Qdrant Edge in a tmp dir, and qdrant-client's local mode: every test asking for it runs on both."""
    idx: VectorIndex
    if request.param == "edge":
        idx = EdgeIndex(tmp_path / "shard")
    else:
        idx = QdrantClientIndex(AsyncQdrantClient(location=":memory:"), f"memories_{uuid.uuid4().hex[:8]}")
    await idx.ensure()
    yield idx
    await idx.close()
