"""The FastAPI application: thin routes over the Temporal client and the SQL store."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from temporalio.client import Client

from api import mcp, problems
from api.input_guard import InputGuardMiddleware
from api.limits import BodyLimitMiddleware
from api.mcp import McpMount
from api.me import routes as me_routes
from api.routes import (
    audit,
    codec,
    conversations,
    correct,
    events,
    export,
    forget,
    health,
    imports,
    memories,
    moderation,
    remediation,
    retention,
    search,
)
from api.routes import settings as settings_routes
from api.state import ApiState
from api.telemetry import metrics_router
from api.token_prefetch import TokenPrefetchMiddleware
from memwarden import detect
from memwarden.config import Settings
from memwarden.stores.sources import SourceRegistry
from memwarden.stores.sql import SqlStore, open_store


def create_app(
    settings: Settings,
    *,
    temporal: Client | None = None,
    store: SqlStore | None = None,
) -> FastAPI:
    """Build the app; pass `temporal` to share a client with an in-process worker (eager start)."""

    mcp_mount: McpMount | None = None

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from memwarden.temporal.client import connect

        own_store = store is None
        sql = store or await open_store(settings)
        client = temporal or await connect(settings)
        sources = SourceRegistry.from_file(settings.sources_path)  # configs only: the API never fetches
        # The API screens every proposal before parking it (api.prescreen): build the detectors now.
        await asyncio.to_thread(detect.warm_up)
        app.state.mw = ApiState(settings=settings, store=sql, temporal=client, sources=sources)
        try:
            async with mcp_mount.running() if mcp_mount else contextlib.nullcontext():
                yield
        finally:
            if own_store:
                await sql.close()

    app = FastAPI(
        title="memwarden",
        version="1",
        summary="A governed memory service for AI agents.",
        lifespan=lifespan,
        # FastAPI's own OpenTelemetry (on whenever the process has a global provider) records each request's
        # path and query, ids and selectors a caller typed: memwarden's spans are its own, content-free ones.
        telemetry={"tracing": False, "metrics": False, "logs": False, "auto_configure": False},
    )
    problems.install(app)
    app.add_middleware(InputGuardMiddleware, verifier=settings.token_verifier)  # inside the body limit
    app.add_middleware(BodyLimitMiddleware, max_bytes=settings.max_request_bytes)
    app.add_middleware(TokenPrefetchMiddleware, verifier=settings.token_verifier)
    app.include_router(health.router)
    app.include_router(memories.router)
    app.include_router(imports.router)
    app.include_router(conversations.router)
    app.include_router(correct.router)
    app.include_router(retention.router)
    app.include_router(search.router)
    app.include_router(settings_routes.router)
    app.include_router(audit.router)
    app.include_router(codec.router)
    if settings.metrics_enabled:
        app.include_router(metrics_router)
    app.add_middleware(codec.CodecCORSMiddleware, origins=settings.codec_cors_origins)
    app.include_router(forget.router)
    app.include_router(remediation.router)
    app.include_router(moderation.router)
    app.include_router(export.router)
    app.include_router(me_routes.router)
    me_routes.mount_static(app)
    app.include_router(events.router)
    if mcp.wanted(settings):
        mcp_mount = mcp.mount(app, settings)  # the mcp extra: imported only now
    return app
