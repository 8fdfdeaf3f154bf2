"""The worker's own probe endpoint: real stores, a real Temporal dev server, real HTTP.

Why here and not only in the e2e: the e2e sees the happy path; this shows /readyz turning 503 and
naming the failing dependency when one is down (a Redis port nobody listens on), which is what a
readiness probe is for.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from memwarden import telemetry
from memwarden.config import Settings
from memwarden.embed import Embedder
from memwarden.services.deps import Deps
from memwarden.stores.cache import Cache, MemoryCache, RedisCache
from memwarden.stores.sql import SqlStore
from memwarden.stores.vectors_edge import EdgeIndex
from memwarden.temporal.client import connect
from stack.devserver import DevServer, free_port
from worker.health import HealthServer


class NoEmbedder:
    """Stand-in embedder (named so): the health endpoint never embeds, and loading the model costs seconds."""

    dim = 384
    model_id = "no-embedder"

    def embed(self, texts: list[str]) -> list[list[float]]:
        raise AssertionError("the health endpoint must not embed")


@pytest.fixture(scope="module")
async def temporal(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    dev = DevServer(tmp_path_factory.mktemp("temporal-health"), port=free_port(), headless=True)
    async with dev:
        yield dev


async def _serve(tmp: Path, temporal: DevServer, cache: Cache) -> tuple[HealthServer, SqlStore, EdgeIndex]:
    settings = Settings(data_dir=tmp, temporal_address=temporal.address)  # type: ignore[call-arg]
    store = await SqlStore.open(f"sqlite+aiosqlite:///{tmp / 'mw.db'}")
    await store.migrate()
    index = EdgeIndex(tmp / "index")
    await index.ensure()
    embedder: Embedder = NoEmbedder()
    deps = Deps(settings=settings, store=store, index=index, cache=cache, embedder=embedder)
    server = HealthServer(await connect(settings), deps, host="127.0.0.1", port=0)
    await server.start()
    return server, store, index


async def test_ready_when_every_dependency_answers(tmp_path: Path, temporal: DevServer) -> None:
    cache = MemoryCache()
    server, store, index = await _serve(tmp_path, temporal, cache)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", timeout=10) as http:
            assert (await http.get("/healthz")).json() == {"status": "ok"}
            ready = await http.get("/readyz")
            assert ready.status_code == 200
            assert ready.json()["checks"] == {"temporal": True, "store": True, "index": True, "cache": True}
            assert (await http.post("/readyz")).status_code == 405
            assert (await http.get("/nope")).status_code == 404

            # What activities measure is recorded in this process, so the worker serves it (counts, no ids).
            def deletions(text: str) -> float:
                wanted = ("memwarden_deletion_duration_seconds_count{", 'scope="owner"', 'status="verified"')
                lines = [ln for ln in text.splitlines() if ln.startswith(wanted[0]) and all(w in ln for w in wanted)]
                return sum(float(ln.rsplit(" ", 1)[1]) for ln in lines)

            before = deletions((await http.get("/metrics")).text)
            telemetry.metrics().record_deletion(2.5, "verified", scope="owner")
            metrics = await http.get("/metrics")
            assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
            assert deletions(metrics.text) == before + 1
            assert (await http.post("/metrics")).status_code == 405
            # Several probes at once are answered independently.
            answers = await asyncio.gather(*(http.get("/readyz") for _ in range(5)))
            assert {a.status_code for a in answers} == {200}
            await index.close()
            gone = await http.get("/readyz")
            assert gone.status_code == 503 and gone.json()["checks"]["index"] is False
    finally:
        await server.stop()
        await store.close()
        await cache.close()


async def test_not_ready_names_the_dependency_that_is_down(tmp_path: Path, temporal: DevServer) -> None:
    dead = RedisCache(f"redis://127.0.0.1:{free_port()}/0", "mwhealth", timeout_seconds=0.5)
    server, store, index = await _serve(tmp_path, temporal, dead)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{server.port}", timeout=10) as http:
            answer = await http.get("/readyz")
            assert answer.status_code == 503
            assert answer.json() == {
                "status": "not_ready",
                "checks": {"temporal": True, "store": True, "index": True, "cache": False},
            }
            assert (await http.get("/healthz")).status_code == 200  # alive, only not ready
    finally:
        await server.stop()
        await index.close()
        await store.close()
        await dead.close()
