"""Nothing sensitive in logs or errors: control characters refused in every field, deep JSON refused,
SQL parameters hidden from exceptions. Every request below carries a marker; the service's log (every
logger, at DEBUG, for the whole module) is scanned for it at the end."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.exc import StatementError

from memwarden.stores.sql_models import candidates
from tests.integration.api_stack import MEMORY, Api, assert_problem, embedded_api
from tests.store_support import fresh_store

MARKER = "zq-marker-7f3a"
CLIENT_LOGGERS = frozenset({"httpx", "httpcore"})
"""The test's own HTTP client logs each URL it requests; the service's log is everything else."""


class Captured(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.name.split(".")[0] in CLIENT_LOGGERS:
            return
        try:
            text = record.getMessage()
        except Exception:  # a record whose args do not format is still scanned by its parts
            text = f"{record.msg} {record.args}"
        if record.exc_info:
            text += logging.Formatter().formatException(record.exc_info)
        self.lines.append(text)


@pytest.fixture(scope="module")
def log() -> Iterator[Captured]:
    handler = Captured()
    root = logging.getLogger()
    previous = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    yield handler
    root.removeHandler(handler)
    root.setLevel(previous)


@pytest.fixture(scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory, log: Captured) -> AsyncIterator[Api]:
    async with embedded_api(Path(tmp_path_factory.mktemp("input-guard"))) as stack:
        yield stack


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def nested(depth: int) -> Any:
    value: Any = {"version": "v1"}
    for _ in range(depth):
        value = {"d": value}
    return value


BAD_BODIES: list[tuple[str, str, dict[str, Any], str]] = [
    ("POST", "/v1/search", {"query": f"where is {MARKER}\x00 kept"}, "query"),
    ("POST", "/v1/search", {"query": f"{MARKER}\x1b[2J"}, "query"),
    ("POST", "/v1/memories", MEMORY | {"content": f"{MARKER} \x07 bell"}, "content"),
    ("POST", "/v1/memories", MEMORY | {"slot": None, "reason": f"user_stated_fact\x00{MARKER}"}, "reason"),
    ("POST", "/v1/memories", MEMORY | {"provenance": {"session": f"s\x0b{MARKER}"}}, "provenance.session"),
    ("POST", "/v1/memories", MEMORY | {"source_ref": {"system": "crm", "key": f"{MARKER}\x00"}}, "source_ref.key"),
    (
        "POST",
        "/v1/forget",
        {"selector": {"kind": "owner", "owner_id": f"alice\x00{MARKER}"}, "reason": "x"},
        "selector.owner_id",
    ),
    ("POST", "/v1/search", {"query": "ok", "types": [f"fact\x7f{MARKER}"]}, "types[0]"),
]


@pytest.mark.parametrize(("method", "path", "body", "field"), BAD_BODIES)
async def test_control_characters_are_refused_in_every_field(
    api: Api, http: httpx.AsyncClient, method: str, path: str, body: dict[str, Any], field: str
) -> None:
    answer = await http.request(method, path, json=body, headers=api.auth(tenant(), "alice"))
    assert_problem(answer, 422, code="validation_failed", field=field)
    assert MARKER not in answer.text


async def test_query_strings_paths_and_forms_too(api: Api, http: httpx.AsyncClient) -> None:
    alice = api.auth(tenant(), "alice")
    answer = await http.get("/v1/memories", params={"cursor": f"{MARKER}\x00"}, headers=alice)
    assert_problem(answer, 422, field="cursor")
    answer = await http.get(f"/v1/memories/{MARKER}%00", headers=alice)
    assert_problem(answer, 422, field="path")
    answer = await http.get("/v1/audit", params={"actor": f"{MARKER}\x1b"}, headers=api.auth(tenant(), "o", "operator"))
    assert_problem(answer, 422, field="actor")
    token = api.token(tenant(), "alice")
    async with httpx.AsyncClient(base_url=api.base_url, cookies={"mw_me": token}) as signed_in:
        form = await signed_in.post("/me/settings", data={"memory_enabled": f"off\x00{MARKER}", "csrf": "x"})
    assert_problem(form, 422, field="memory_enabled")
    assert MARKER not in answer.text + form.text


async def test_tabs_and_newlines_are_text(api: Api, http: httpx.AsyncClient) -> None:
    alice = api.auth(tenant(), "alice")
    answer = await http.post("/v1/memories", json=MEMORY | {"content": "Prefers tea\n\tto coffee\r\n"}, headers=alice)
    assert answer.status_code == 200 and answer.json()["decision"] == "ADD", answer.text
    assert (await http.post("/v1/search", json={"query": "tea\n"}, headers=alice)).status_code == 200


async def test_anonymous_callers_get_401_first(http: httpx.AsyncClient) -> None:
    answer = await http.post("/v1/search", json={"query": f"{MARKER}\x00"})
    assert_problem(answer, 401)
    bad = await http.post("/v1/search", json={"query": "x\x00"}, headers={"Authorization": "Bearer not-a-token"})
    assert_problem(bad, 401, code="invalid_token")


@pytest.mark.parametrize("depth", [40, 5000, 200_000])
async def test_deeply_nested_json_is_4xx_never_500(api: Api, http: httpx.AsyncClient, depth: int) -> None:
    t = tenant()
    event = {"specversion": "1.0", "id": f"e-{MARKER}", "source": "programs", "type": "memwarden.source.changed"}
    raw = json.dumps(event | {"subject": "k", "data": {"v": 1}})
    body = raw.replace('{"v": 1}', '{"d": ' * depth + '"x"' + "}" * depth)
    headers = api.auth(t, "programs", "system") | {"Content-Type": "application/cloudevents+json"}
    answer = await http.post("/v1/events", content=body.encode(), headers=headers)
    assert answer.status_code in (400, 413, 422), answer.text[:300]
    assert answer.headers["content-type"] == "application/problem+json"
    for path in ("/v1/memories", "/v1/search", "/v1/forget"):
        deep = '{"content": ' + "[" * depth + "]" * depth + "}"
        answer = await http.post(
            path, content=deep.encode(), headers=api.auth(t, "alice") | {"Content-Type": "application/json"}
        )
        assert answer.status_code in (400, 413, 422), (path, answer.text[:300])
        assert answer.headers["content-type"] == "application/problem+json"


async def test_sql_parameters_are_hidden_from_exceptions(api: Api, tmp_path: Path) -> None:
    """A failing statement's exception (and so any log line or trace of it) never carries its values."""
    stores = [api.store]
    async with fresh_store("postgresql", tmp_path) as pg:
        stores.append(pg)
        for store in stores:
            ref = f"ref-{uuid.uuid4().hex}"
            now = datetime.now(UTC)
            row = {"ref": ref, "tenant_id": "t", "content": f"{MARKER} secret", "created_at": now}
            statement = sa.insert(candidates).values(**row, expires_at=now + timedelta(days=1))
            async with store.engine.begin() as conn:
                await conn.execute(statement)
            with pytest.raises(StatementError) as raised:
                async with store.engine.begin() as conn:
                    await conn.execute(statement)  # the same primary key again
            assert MARKER not in str(raised.value) and ref not in str(raised.value)
            assert "hidden" in str(raised.value)


def test_the_service_log_never_held_the_marker(log: Captured) -> None:
    """Runs last in the module: everything above was logged (at DEBUG, by every logger) without it."""
    assert log.lines, "nothing was captured: the scan would prove nothing"
    leaked = [line[:200] for line in log.lines if MARKER in line]
    assert leaked == []
