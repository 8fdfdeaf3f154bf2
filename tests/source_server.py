"""A real HTTP system of record for tests, run by the test on 127.0.0.1 and a free port.

It speaks the protocol of ARCHITECTURE.md ("Systems of record"): `GET /records/{key}` answers 304
when `If-None-Match` carries the record's current version, 200 `{"content", "version"}` (with an
ETag) otherwise, and 404 or 410 for records deleted. Tests steer it: change values, delete records,
delay or hang every answer, go down (503 or a dropped connection), or flap (every other answer 503).
It also serves `GET /t/{tenant}/o/{owner}/records/{key}` (`scoped_url`): a record put with an owner
(and tenant) answers there only for them, 404 for anyone else, as a source that scopes its keys to
their owner does; a record put without one is served there to any owner. It counts requests per key
and keeps the paths and If-None-Match headers it saw. Standard library only, one thread per request,
so a hanging answer never blocks the next one.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote


@dataclass
class SourceState:
    records: dict[str, tuple[str, str]] = field(default_factory=dict)
    """key -> (content, version)"""
    owners: dict[str, tuple[str, str]] = field(default_factory=dict)
    """key -> (tenant, owner) whose record it is, for the scoped path"""
    paths: list[str] = field(default_factory=list)
    deleted: dict[str, int] = field(default_factory=dict)
    """key -> 404 or 410"""
    delay: float = 0.0
    mode: str = "up"
    """up | down (503) | drop (connection closed, no answer) | flap (503, then an answer, alternately)"""
    requests: Counter[str] = field(default_factory=Counter)
    conditional: list[str | None] = field(default_factory=list)
    flips: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class SourceServer:
    """Start with `with SourceServer() as src:`; `src.url` goes into sources.toml."""

    def __init__(self) -> None:
        self.state = SourceState()
        state = self.state

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as a real system of record would allow

            def log_message(self, *args: object) -> None:  # quiet
                return

            def do_GET(self) -> None:
                parts = self.path.split("/")
                scope: tuple[str, str] | None = None
                if len(parts) == 3 and parts[1] == "records":
                    key = unquote(parts[2])
                elif len(parts) == 7 and (parts[1], parts[3], parts[5]) == ("t", "o", "records"):
                    key, scope = unquote(parts[6]), (unquote(parts[2]), unquote(parts[4]))
                else:
                    self.send_error(400)
                    return
                with state.lock:
                    state.paths.append(self.path)
                    if scope is not None and state.owners.get(key, scope) != scope:
                        self._send(404, b"")
                        return
                    state.requests[key] += 1
                    state.conditional.append(self.headers.get("If-None-Match"))
                    delay, mode = state.delay, state.mode
                    if mode == "flap":
                        state.flips += 1
                        mode = "down" if state.flips % 2 == 1 else "up"
                    record = state.records.get(key)
                    gone = state.deleted.get(key)
                if delay:
                    time.sleep(delay)
                if mode == "drop":
                    self.close_connection = True
                    self.connection.close()
                    return
                if mode == "down":
                    self._send(503, b'{"error": "maintenance"}')
                    return
                if gone is not None:
                    self._send(gone, b"")
                    return
                if record is None:
                    self._send(404, b"")
                    return
                content, version = record
                if _matches(self.headers.get("If-None-Match"), version):
                    self._send(304, b"", etag=version)
                    return
                self._send(200, json.dumps({"content": content, "version": version}).encode(), etag=version)

            def _send(self, status: int, body: bytes, etag: str | None = None) -> None:
                self.send_response(status)
                if etag is not None:
                    self.send_header("ETag", f'"{etag}"')
                if status != 304:
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if status != 304 and body:
                    self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/records/{{key}}"

    @property
    def scoped_url(self) -> str:
        """A template naming the tenant and owner: the source confirms each key belongs to its owner."""
        return f"http://127.0.0.1:{self.port}/t/{{tenant}}/o/{{owner}}/records/{{key}}"

    def __enter__(self) -> SourceServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- steering ----------------------------------------------------------------------------

    def put(self, key: str, content: str, version: str, *, owner: tuple[str, str] | None = None) -> None:
        """Set a record; `owner` (tenant, owner) is whose it is on the scoped path (unset: anyone's)."""
        with self.state.lock:
            self.state.records[key] = (content, version)
            self.state.deleted.pop(key, None)
            if owner is not None:
                self.state.owners[key] = owner

    def delete(self, key: str, status: int = 404) -> None:
        with self.state.lock:
            self.state.records.pop(key, None)
            self.state.deleted[key] = status

    def set(self, *, delay: float | None = None, mode: str | None = None) -> None:
        with self.state.lock:
            if delay is not None:
                self.state.delay = delay
            if mode is not None:
                self.state.mode = mode
                self.state.flips = 0

    def requests(self, key: str) -> int:
        with self.state.lock:
            return self.state.requests[key]


def _matches(header: str | None, version: str) -> bool:
    if not header:
        return False
    tags = [t.strip() for t in header.split(",")]
    return any(t.removeprefix("W/").strip('"') == version for t in tags) or "*" in tags


def sources_toml(name: str, url: str, **fields: object) -> str:
    """One `[sources.<name>]` table (values as TOML literals)."""
    lines = [f"[sources.{name}]", f'url = "{url}"']
    for key, value in fields.items():
        if isinstance(value, bool):
            lines.append(f"{key} = {'true' if value else 'false'}")
        elif isinstance(value, str):
            lines.append(f'{key} = "{value}"')
        elif isinstance(value, list | tuple):
            lines.append(f"{key} = [{', '.join(json.dumps(v) for v in value)}]")
        else:
            lines.append(f"{key} = {value}")
    return "\n".join(lines) + "\n"
