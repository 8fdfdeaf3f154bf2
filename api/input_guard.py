"""Control characters and runaway nesting are refused at the door, for every route and every field.

Why: NUL cannot be stored in PostgreSQL text or jsonb, and a driver's error about it carries the
statement's parameters, which would put a memory or a query into an exception and a log line. Other
control characters (escape sequences, backspace, bell) rewrite what a terminal or a log viewer
shows. So any string in a JSON body (keys included, at any depth), a form body, the query string or
the path that holds a character of Unicode category Cc other than tab, line feed and carriage return
is a `422 validation_failed` naming the field, never echoing the text. A JSON body nested deeper than
`MAX_DEPTH` is a `400 json_too_deep` before anything parses it (a recursive parser would otherwise
fail with a RecursionError, a 500 where a route parses the body itself).

Only a caller with a valid token is told: an anonymous or badly authenticated request passes on, so
the route answers 401 first and nothing about the body rules leaks to it.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qsl, unquote

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from api.problems import instance_of
from api.token_prefetch import request_tokens
from memwarden.identity import AuthError
from memwarden.jwks import TokenVerifier

MAX_DEPTH = 32
"""Deeper than any body of the contract (a CloudEvent's data, a selector) needs."""
ALLOWED_CONTROLS = frozenset("\t\n\r")
DEEP = f"the JSON body nests deeper than {MAX_DEPTH} levels"


def control_character(value: str) -> bool:
    """Whether `value` holds a control character other than tab, line feed and carriage return."""
    return any(unicodedata.category(c) == "Cc" and c not in ALLOWED_CONTROLS for c in value)


def json_depth_exceeds(body: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether the JSON text nests arrays and objects deeper than `limit` (a scan, no parsing)."""
    depth = 0
    in_string = escaped = False
    for byte in body:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):
            depth -= 1
    return False


def _strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(field, string) for every string in a parsed JSON value, keys included; iterative, any depth."""
    stack: list[tuple[Any, str]] = [(value, path)]
    while stack:
        item, at = stack.pop()
        if isinstance(item, str):
            yield at or "body", item
        elif isinstance(item, dict):
            for key, child in item.items():
                name = f"{at}.{key}" if at else str(key)
                yield name, str(key)
                stack.append((child, name))
        elif isinstance(item, list):
            stack.extend((child, f"{at}[{i}]" if at else f"[{i}]") for i, child in enumerate(item))


def _field_name(field: str) -> str:
    """A field path fit to name in a problem: its control characters (it may be a key) removed."""
    return "".join(c for c in field if not (unicodedata.category(c) == "Cc")) or "body"


def offending_field(scope: Scope, body: bytes) -> tuple[str, str] | None:
    """(field, reason) for the first thing this request may not carry, or None."""
    path = scope.get("path", "")
    if control_character(unquote(path)):
        return "path", "the path contains a control character"
    query = scope.get("query_string", b"").decode("latin-1")
    for name, value in parse_qsl(query, keep_blank_values=True):
        if control_character(name) or control_character(value):
            return _field_name(name), "a query parameter contains a control character"
    content_type = ""
    for key, value in scope.get("headers", []):
        if key == b"content-type":
            content_type = value.decode("latin-1").split(";", 1)[0].strip().lower()
    if not body:
        return None
    if content_type == "application/x-www-form-urlencoded":
        for name, value in parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True):
            if control_character(name) or control_character(value):
                return _field_name(name), "a form field contains a control character"
        return None
    if content_type == "application/json" or content_type.endswith("+json"):
        if json_depth_exceeds(body):
            return "body", DEEP
        try:
            parsed = json.loads(body)
        except (ValueError, RecursionError):
            return None  # the route reports malformed JSON in its own terms
        for field, text in _strings(parsed, ""):
            if control_character(text):
                return _field_name(field), "a field contains a control character"
    return None


class InputGuardMiddleware:
    """Refuses what `offending_field` finds, for callers with a valid token (runs inside the body limit)."""

    def __init__(self, app: ASGIApp, verifier: TokenVerifier) -> None:
        self.app = app
        self.verifier = verifier

    def _authenticated(self, scope: Scope) -> bool:
        for token in request_tokens(scope):
            try:
                self.verifier.verify(token)
            except AuthError:
                continue
            return True
        return False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        found = offending_field(scope, body)
        if found is not None and self._authenticated(scope):
            await _refuse(send, scope.get("path", ""), *found)
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _refuse(send: Send, path: str, field: str, reason: str) -> None:
    """422 validation_failed; a body too deep to parse is 400 json_too_deep (as a parser failure is)."""
    instance = instance_of(path) if not control_character(unquote(path)) else None
    status, code, title = (
        (400, "json_too_deep", "Bad Request")
        if reason == DEEP
        else (
            422,
            "validation_failed",
            "Unprocessable Content",
        )
    )
    problem: dict[str, Any] = {
        "type": f"urn:memwarden:problem:{code}",
        "title": title,
        "status": status,
        "detail": reason,
        "code": code,
        "errors": [{"field": field, "message": reason}],
    }
    if instance:
        problem["instance"] = instance
    body = json.dumps(problem).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/problem+json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
