"""One embedded stack for the API tests of a module, over real HTTP, and the helpers they share.

In this process: the Temporal dev server (child process), the worker over SQLite + Qdrant Edge, and
the API under uvicorn on a free port, the same pieces `memwarden up` wires together. Tests use their
own tenants, so they do not see each other's data.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from memwarden.config import Settings
from memwarden.identity import mint_token
from memwarden.services.deps import Deps
from memwarden.stores.sql import SqlStore
from tests.stack_support import embedded_stack

PROBLEM = "application/problem+json"
MEMORY = {"content": "Prefers tea to coffee", "type": "preference", "source_kind": "user", "reason": "user_stated_fact"}


@dataclass
class Api:
    base_url: str
    settings: Settings
    store: SqlStore
    deps: Deps
    """The in-process worker's stores and tier (tests that check what the activity took from where)."""

    def token(self, tenant: str, sub: str, role: str = "user", **claims: Any) -> str:
        return mint_token(self.settings.auth_secret_value, tenant=tenant, sub=sub, role=role, **claims)

    def auth(self, tenant: str, sub: str, role: str = "user", **claims: Any) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(tenant, sub, role, **claims)}"}


@asynccontextmanager
async def embedded_api(data_dir: Path, **overrides: Any) -> AsyncIterator[Api]:
    """Dev server, worker and API under uvicorn (tests/stack_support.py), all torn down on exit."""
    async with embedded_stack(data_dir, **overrides) as stack:
        yield Api(stack.base_url, stack.settings, stack.deps.store, stack.deps)


def assert_problem(
    response: httpx.Response, status: int, *, field: str | None = None, code: str | None = None
) -> dict[str, Any]:
    """RFC 9457 shape, the status in the body matching the line, and the field at fault when named."""
    assert response.status_code == status, f"{response.status_code}: {response.text[:500]}"
    assert response.headers["content-type"] == PROBLEM
    body = response.json()
    for key in ("type", "title", "detail"):
        assert isinstance(body.get(key), str) and body[key], f"problem without {key}: {body}"
    assert body["status"] == status
    assert body["type"].startswith("urn:memwarden:problem:")
    if code is not None:
        assert body["code"] == code, body
    if field is not None:
        fields = [e["field"] for e in body.get("errors", [])]
        assert field in fields, f"{field!r} not among the fields at fault {fields}"
    return body  # type: ignore[no-any-return]


async def remember(http: httpx.AsyncClient, headers: dict[str, str], **fields: Any) -> dict[str, Any]:
    answer = await http.post("/v1/memories", headers=headers, json=MEMORY | fields)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]
