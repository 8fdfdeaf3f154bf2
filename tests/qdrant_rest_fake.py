"""FAKE: a stand-in for a remote Qdrant server, speaking the subset of Qdrant's REST protocol memwarden uses.

Why a fake: no Qdrant server binary can be installed here (PyPI, Debian and npm carry only clients),
and qdrant-client's local mode has no segments, so it cannot show whether deleted points are
compacted. This fake models the one behaviour the Forget sink depends on, as Qdrant documents it:
a delete only *marks* points deleted (they stay in the segment, vectors and payload); the vacuum
optimizer removes them, when a segment's deleted fraction reaches `deleted_threshold` and it holds
at least `vacuum_min_vector_number` points, and optimizers run after a collection update; while one
runs the collection is `yellow`, then `green`. Every request is logged for the test to read.

It is not Qdrant: search, filters and indexes are not implemented (the compaction test does not
search), and nothing here was checked against a real server.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from qdrant_client.http import models

VERSION = "1.15.0"


@dataclass
class FakeCollection:
    live: dict[str, dict[str, Any]] = field(default_factory=dict)
    marked_deleted: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Deleted but still in the segment (what a file scan of a real server's storage would find)."""
    deleted_threshold: float = 0.2
    vacuum_min_vector_number: int = 1000
    optimizing_polls: int = 0
    """GETs left that answer `yellow` (an optimization in progress) before the vacuum has run."""
    payload_schema: dict[str, Any] = field(default_factory=dict)


@dataclass
class FakeQdrant:
    collections: dict[str, FakeCollection] = field(default_factory=dict)
    log: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def _optimize(self, c: FakeCollection) -> None:
        total = len(c.live) + len(c.marked_deleted)
        if not c.marked_deleted or total == 0:
            return
        # The vacuum bound: the fake's one segment holds every point (live and marked).
        if len(c.marked_deleted) / total >= c.deleted_threshold and total >= c.vacuum_min_vector_number:
            c.optimizing_polls = 2

    def info(self, c: FakeCollection) -> dict[str, Any]:
        status = models.CollectionStatus.GREEN
        if c.optimizing_polls > 0:
            c.optimizing_polls -= 1
            status = models.CollectionStatus.YELLOW
            if c.optimizing_polls == 0:
                c.marked_deleted.clear()  # the rebuilt segment no longer holds them
        info = models.CollectionInfo(
            status=status,
            optimizer_status=models.OptimizersStatusOneOf.OK,
            segments_count=1,
            points_count=len(c.live),
            indexed_vectors_count=0,
            config=models.CollectionConfig(
                params=models.CollectionParams(),
                hnsw_config=models.HnswConfig(m=16, ef_construct=100, full_scan_threshold=10000),
                optimizer_config=models.OptimizersConfig(
                    deleted_threshold=c.deleted_threshold,
                    vacuum_min_vector_number=c.vacuum_min_vector_number,
                    default_segment_number=0,
                    flush_interval_sec=5,
                ),
            ),
            payload_schema={
                k: models.PayloadIndexInfo(data_type=models.PayloadSchemaType.KEYWORD, points=0)
                for k in c.payload_schema
            },
        )
        return info.model_dump(mode="json", exclude_none=True)


def _ok(result: Any) -> JSONResponse:
    return JSONResponse({"result": result, "status": "ok", "time": 0.0})


def fake_qdrant_app(state: FakeQdrant) -> FastAPI:
    """The fake server's routes over `state` (run it under uvicorn on a free port)."""
    app = FastAPI()

    async def logged(request: Request) -> dict[str, Any]:
        body = await request.json() if request.method in ("PUT", "POST", "PATCH") else {}
        state.log.append(
            (request.method, request.url.path + ("?" + request.url.query if request.url.query else ""), body)
        )
        return body if isinstance(body, dict) else {}

    @app.get("/")
    async def root() -> dict[str, str]:
        return {"title": "qdrant - vector search engine (FAKE)", "version": VERSION}

    @app.get("/collections/{name}/exists")
    async def exists(name: str, request: Request) -> JSONResponse:
        await logged(request)
        return _ok({"exists": name in state.collections})

    @app.put("/collections/{name}")
    async def create(name: str, request: Request) -> JSONResponse:
        body = await logged(request)
        c = state.collections.setdefault(name, FakeCollection())
        _apply(c, body.get("optimizers_config") or {})
        return _ok(True)

    @app.patch("/collections/{name}")
    async def update(name: str, request: Request) -> JSONResponse:
        body = await logged(request)
        c = state.collections[name]
        _apply(c, body.get("optimizers_config") or {})
        state._optimize(c)  # a collection update triggers the optimizers
        return _ok(True)

    @app.get("/collections/{name}")
    async def get(name: str, request: Request) -> JSONResponse:
        await logged(request)
        return _ok(state.info(state.collections[name]))

    @app.put("/collections/{name}/index")
    async def index(name: str, request: Request) -> JSONResponse:
        body = await logged(request)
        state.collections[name].payload_schema[body["field_name"]] = body.get("field_schema")
        return _ok({"operation_id": len(state.log), "status": "completed"})

    @app.put("/collections/{name}/points")
    async def upsert(name: str, request: Request) -> JSONResponse:
        body = await logged(request)
        c = state.collections[name]
        for p in body["points"]:
            c.live[str(p["id"])] = {"vector": p.get("vector"), "payload": p.get("payload")}
            c.marked_deleted.pop(str(p["id"]), None)
        return _ok({"operation_id": len(state.log), "status": "completed"})

    @app.post("/collections/{name}/points/delete")
    async def delete(name: str, request: Request) -> JSONResponse:
        body = await logged(request)
        c = state.collections[name]
        for pid in body.get("points", []):
            found = c.live.pop(str(pid), None)
            if found is not None:
                c.marked_deleted[str(pid)] = found  # marked, not removed: a real segment keeps the bytes
        return _ok({"operation_id": len(state.log), "status": "completed"})

    @app.post("/collections/{name}/points")
    async def retrieve(name: str, request: Request) -> JSONResponse:
        body = await logged(request)
        c = state.collections[name]
        return _ok([{"id": pid, "payload": None, "vector": None} for pid in body.get("ids", []) if str(pid) in c.live])

    return app


def _apply(c: FakeCollection, diff: dict[str, Any]) -> None:
    if diff.get("deleted_threshold") is not None:
        c.deleted_threshold = float(diff["deleted_threshold"])
    if diff.get("vacuum_min_vector_number") is not None:
        c.vacuum_min_vector_number = int(diff["vacuum_min_vector_number"])
