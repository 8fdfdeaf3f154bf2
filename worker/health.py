"""The worker's own /healthz, /readyz and /metrics (the worker serves no other HTTP).

Why not the API's: a worker pod must be restarted when *its* event loop hangs and kept out of
rotation when *its* stores are down, which only the worker itself can tell; and what activities
measure (deletion completion time) is recorded in the worker's process. A tiny HTTP/1.0 server on
asyncio streams is enough; it answers GET only, never reads a body, and says nothing but booleans
and Prometheus counts (no ids, no content).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from temporalio.client import Client

from memwarden import telemetry
from memwarden.services.deps import Deps

CHECK_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 5.0
MAX_REQUEST_LINE = 1024


async def _ok(check: Callable[[], Awaitable[object]]) -> bool:
    try:
        return bool(await asyncio.wait_for(check(), CHECK_TIMEOUT_S))
    except Exception:  # any failure is "not ready"; the probe needs only the boolean
        return False


async def readiness(client: Client, deps: Deps) -> dict[str, bool]:
    """Temporal, the SQL store, the index and the cache, as this worker sees them."""
    temporal, store, index, cache = await asyncio.gather(
        _ok(client.service_client.check_health),
        _ok(deps.store.ping),
        _ok(deps.index.health),
        _ok(deps.cache.health),
    )
    return {"temporal": temporal, "store": store, "index": index, "cache": cache}


def _response(status: int, body: dict[str, object] | bytes, content_type: str = "application/json") -> bytes:
    reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}[status]
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    head = (
        f"HTTP/1.0 {status} {reason}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n"
    )
    return head.encode() + data


class HealthServer:
    """Serve /healthz (the loop answers) and /readyz (every dependency answers) on host:port."""

    def __init__(self, client: Client, deps: Deps, *, host: str, port: int) -> None:
        self._client = client
        self._deps = deps
        self._host = host
        self._port = port
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._handle, self._host, self._port)

    @property
    def port(self) -> int:
        assert self._server is not None, "not started"
        return int(self._server.sockets[0].getsockname()[1])

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await asyncio.wait_for(reader.readline(), READ_TIMEOUT_S)
            method, _, rest = line[:MAX_REQUEST_LINE].decode("latin-1").partition(" ")
            path = rest.split(" ", 1)[0].split("?", 1)[0]
            writer.write(await self._answer(method, path))
            await writer.drain()
        except (TimeoutError, ConnectionError, UnicodeDecodeError):
            pass
        finally:
            writer.close()

    async def _answer(self, method: str, path: str) -> bytes:
        if path not in ("/healthz", "/readyz", "/metrics"):
            return _response(404, {"status": "not_found"})
        if method != "GET":
            return _response(405, {"status": "method_not_allowed"})
        if path == "/healthz":
            return _response(200, {"status": "ok"})
        if path == "/metrics":
            return _response(200, generate_latest(telemetry.metrics().registry), CONTENT_TYPE_LATEST)
        checks = await readiness(self._client, self._deps)
        if all(checks.values()):
            return _response(200, {"status": "ready", "checks": checks})
        return _response(503, {"status": "not_ready", "checks": checks})
