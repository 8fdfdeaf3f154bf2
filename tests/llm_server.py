"""A fake OpenAI-compatible chat-completions server for tests (no model can run here), over real HTTP.

It speaks the protocol's shape: `POST /v1/chat/completions` with `{model, messages, response_format}` and a
bearer key, answering `{id, object: "chat.completion", model, choices: [{index, message: {role, content},
finish_reason}], usage}`. It refuses a request without `response_format.type == "json_schema"` and a
`json_schema.schema` (400, as a strict server does), and a wrong key (401). The completion is canned: a test
sets the JSON content to answer (or a function of the request), and steers failures: the next N answers 500,
malformed content, or a delay longer than the client's timeout. It keeps each request body it received.
Standard library only, one thread per request.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class LlmState:
    key: str = "test-key"
    answer: Callable[[dict[str, Any]], dict[str, Any]] = lambda _body: {"candidates": []}
    fail_next: int = 0
    malformed_next: int = 0
    delay_next: int = 0
    delay: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class FakeChatCompletions:
    """`with FakeChatCompletions() as llm:`; `llm.base_url` is what settings name."""

    def __init__(self) -> None:
        self.state = LlmState()
        state = self.state

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                return

            def do_POST(self) -> None:
                if self.path != "/v1/chat/completions":
                    self._send(404, {"error": {"message": "not found"}})
                    return
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                with state.lock:
                    state.requests.append(body)
                    fail = state.fail_next > 0
                    malformed = not fail and state.malformed_next > 0
                    delayed = state.delay_next > 0
                    state.fail_next -= fail
                    state.malformed_next -= malformed
                    state.delay_next -= delayed
                    delay, key, answer = state.delay, state.key, state.answer
                if self.headers.get("Authorization") != f"Bearer {key}":
                    self._send(401, {"error": {"message": "invalid api key"}})
                    return
                schema = (body.get("response_format") or {}).get("json_schema") or {}
                if (body.get("response_format") or {}).get("type") != "json_schema" or "schema" not in schema:
                    self._send(400, {"error": {"message": "response_format json_schema required"}})
                    return
                if delayed:
                    time.sleep(delay)
                if fail:
                    self._send(500, {"error": {"message": "overloaded"}})
                    return
                content = "{not json" if malformed else json.dumps(answer(body))
                self._send(
                    200,
                    {
                        "id": "chatcmpl-fake",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model"),
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                        ],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    },
                )

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> FakeChatCompletions:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def set(self, **fields: Any) -> None:
        with self.state.lock:
            for name, value in fields.items():
                setattr(self.state, name, value)

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self.state.lock:
            return list(self.state.requests)
