"""RFC 9457 problem+json for every error the API gives, with the field at fault when there is one.

Bad input must never become a 500, and a problem never echoes the submitted text: validation
errors name the field and the rule, not the value.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

PROBLEM_TYPE = "application/problem+json"

TITLES = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    413: "Content Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Content",
    500: "Internal Server Error",
    503: "Service Unavailable",
}


class Problem(Exception):
    """Raise anywhere in a route to answer with a problem document."""

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        *,
        field: str | None = None,
        extra: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(code)
        self.status = status
        self.code = code
        self.detail = detail
        self.field = field
        self.extra = extra or {}
        self.headers = headers


def problem_response(
    status: int,
    code: str,
    detail: str,
    *,
    instance: str | None = None,
    errors: list[dict[str, str]] | None = None,
    extra: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": f"urn:memwarden:problem:{code}",
        "title": TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        "code": code,
    }
    if instance:
        body["instance"] = instance
    if errors:
        body["errors"] = errors
    if extra:
        body.update(extra)
    return JSONResponse(body, status_code=status, media_type=PROBLEM_TYPE, headers=headers)


_PATH_TOKEN = re.compile(r"^/codec/t/[^/]*")


def instance_of(path: str) -> str:
    """The path a problem names, without a bearer token that rides in it (the codec's browser form)."""
    return _PATH_TOKEN.sub("/codec/t/~", path)


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    # Only the first element says where (body, query, ...); a field may itself be named `query`.
    parts = [str(p) for p in loc]
    if parts and parts[0] in ("body", "query", "path", "header", "cookie"):
        parts = parts[1:]
    return ".".join(parts) or "body"


def install(app: FastAPI) -> None:
    """Route every error path through problem+json."""

    @app.exception_handler(Problem)
    async def _problem(request: Request, exc: Problem) -> JSONResponse:
        errors = [{"field": exc.field, "message": exc.detail}] if exc.field else None
        return problem_response(
            exc.status,
            exc.code,
            exc.detail,
            instance=instance_of(request.url.path),
            errors=errors,
            extra=exc.extra,
            headers=exc.headers,
        )

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            # Malformed JSON is located by character offset; the field at fault is the body.
            {
                "field": "body" if e.get("type") == "json_invalid" else _field(e.get("loc", ())),
                "message": str(e.get("msg", "invalid")),
            }
            for e in exc.errors()
        ]
        too_long = [
            e for e in exc.errors() if e.get("type") == "string_too_long" and _field(e.get("loc", ())) == "content"
        ]
        status = 413 if too_long else 422
        fields = ", ".join(sorted({e["field"] for e in errors}))
        return problem_response(
            status,
            "content_too_large" if too_long else "validation_failed",
            f"invalid field(s): {fields}",
            instance=instance_of(request.url.path),
            errors=errors,
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed", 401: "unauthorized"}.get(exc.status_code, "http_error")
        detail = exc.detail if isinstance(exc.detail, str) else TITLES.get(exc.status_code, "error")
        instance = instance_of(request.url.path)
        return problem_response(exc.status_code, code, detail, instance=instance, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # The exception text may carry data; the response names only its class.
        detail = f"unexpected {type(exc).__name__}"
        return problem_response(500, "internal_error", detail, instance=instance_of(request.url.path))
