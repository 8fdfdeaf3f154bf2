"""The HTTP API's failure surface over real HTTP: problem+json for every error, never a 500 for bad input.

One embedded stack per module, in this process: the Temporal dev server (child process), the
worker over SQLite + Qdrant Edge, and the API under uvicorn on a free port, the same pieces
`memwarden up` wires together. Each test uses its own tenant, so tests do not see each other's data.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import jwt
import pytest
import sqlalchemy as sa
import uvicorn

from api.app import create_app
from memwarden.identity import mint_token, token_key
from memwarden.records import MemoryRecord, MemoryType, SourceKind, Status, content_hash
from memwarden.stores.sql_models import candidates, memories
from memwarden.temporal.client import connect
from stack.devserver import free_port
from stack.embedded import run_api
from tests.integration.api_stack import MEMORY, Api, assert_problem, remember

# -- 401 -------------------------------------------------------------------------------------------

ENDPOINTS = [
    ("POST", "/v1/memories", MEMORY),
    ("POST", "/v1/search", {"query": "tea"}),
    ("GET", "/v1/memories", None),
    ("GET", f"/v1/memories/{uuid.uuid4()}", None),
]


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
async def test_401_without_a_bearer_token(
    http: httpx.AsyncClient, method: str, path: str, body: dict[str, Any] | None
) -> None:
    for headers in ({}, {"Authorization": "Basic YWxpY2U6c2VjcmV0"}, {"Authorization": "Bearer"}):
        answer = await http.request(method, path, json=body, headers=headers)
        assert_problem(answer, 401, field="Authorization", code="unauthorized")
        assert answer.headers["www-authenticate"] == "Bearer"


def _bad_tokens(api: Api) -> dict[str, str]:
    secret = token_key(api.settings.auth_secret_value)  # what local tokens are signed with
    now = int(time.time())
    good = {
        "iss": "memwarden",
        "aud": "memwarden",
        "tenant": "t401",
        "sub": "alice",
        "role": "user",
        "iat": now,
        "exp": now + 600,
    }
    return {
        "garbage": "not-a-jwt",
        "other_secret": mint_token("another-secret-entirely-xxxxxxxxxxxxxxxx", tenant="t401", sub="alice", role="user"),
        "expired": mint_token(secret, tenant="t401", sub="alice", role="user", ttl_seconds=60, now=time.time() - 3600),
        "other_issuer": mint_token(secret, tenant="t401", sub="alice", role="user", issuer="someone-else"),
        "alg_none": jwt.encode(good, key=None, algorithm="none"),
        "no_exp": jwt.encode({k: v for k, v in good.items() if k != "exp"}, secret, algorithm="HS256"),
        "unknown_role": jwt.encode(good | {"role": "root"}, secret, algorithm="HS256"),
        "agent_without_agent": jwt.encode(good | {"role": "agent"}, secret, algorithm="HS256"),
        "tenant_not_a_string": jwt.encode(good | {"tenant": {"x": 1}}, secret, algorithm="HS256"),
        "no_tenant": jwt.encode({k: v for k, v in good.items() if k != "tenant"}, secret, algorithm="HS256"),
        "stores_not_a_list": jwt.encode(good | {"stores": "team"}, secret, algorithm="HS256"),
        "sub_too_long": jwt.encode(good | {"sub": "a" * 5000}, secret, algorithm="HS256"),
        "no_audience": jwt.encode({k: v for k, v in good.items() if k != "aud"}, secret, algorithm="HS256"),
        "other_audience": jwt.encode(good | {"aud": "billing"}, secret, algorithm="HS256"),
        "lives_too_long": jwt.encode(good | {"exp": now + 30 * 86400}, secret, algorithm="HS256"),
        "signed_with_the_raw_secret": jwt.encode(good, api.settings.auth_secret_value, algorithm="HS256"),
    }


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
async def test_401_for_invalid_or_expired_tokens(
    api: Api, http: httpx.AsyncClient, method: str, path: str, body: dict[str, Any] | None
) -> None:
    for name, token in _bad_tokens(api).items():
        answer = await http.request(method, path, json=body, headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 401, f"{name}: {answer.status_code} {answer.text[:300]}"
        assert_problem(answer, 401, field="Authorization", code="invalid_token")
        assert token not in answer.text, name


async def test_401_comes_before_body_validation(http: httpx.AsyncClient) -> None:
    """An anonymous caller learns nothing about the body rules (and nothing is parsed for it)."""
    assert_problem(await http.post("/v1/memories", json={"bogus": 1}), 401)
    assert_problem(await http.post("/v1/search", json={"k": 999}), 401)
    assert_problem(await http.get("/v1/memories", params={"limit": 999, "cursor": "zz"}), 401)


# -- 403 -------------------------------------------------------------------------------------------


async def test_403_for_roles_and_namespaces_a_principal_may_not_use(api: Api, http: httpx.AsyncClient) -> None:
    t = "t403"
    operator = api.auth(t, "ops", "operator")
    for role in ("operator", "privacy"):
        who = api.auth(t, f"{role}-1", role)
        assert_problem(await http.post("/v1/memories", headers=who, json=MEMORY), 403, code="role_cannot_write")
    # A system of record writes only `system` memories (memwarden.identity.SOURCE_KINDS).
    system = api.auth(t, "system-1", "system")
    answer = await http.post("/v1/memories", headers=system, json=MEMORY)
    assert_problem(answer, 403, code="source_kind_not_allowed", field="source_kind")
    assert_problem(await http.post("/v1/search", headers=operator, json={"query": "tea"}), 403, code="forbidden_role")
    assert_problem(await http.get("/v1/memories", headers=operator), 403, code="forbidden_role")
    assert_problem(await http.get(f"/v1/memories/{uuid.uuid4()}", headers=operator), 403, code="forbidden_role")

    agent = api.auth(t, "svc", "agent", agent="planner", on_behalf_of="alice")
    # An agent writing about a user it does not serve, in user or in agent scope.
    for scope in ("user", "agent"):
        answer = await http.post("/v1/memories", headers=agent, json=MEMORY | {"owner_id": "bob", "scope": scope})
        assert_problem(answer, 403, code="owner_mismatch")
    lone = api.auth(t, "svc", "agent", agent="planner")
    assert_problem(await http.post("/v1/memories", headers=lone, json=MEMORY), 403, code="agent_serves_no_user")
    shared = MEMORY | {"scope": "shared", "store": "team-notes"}
    assert_problem(await http.post("/v1/memories", headers=agent, json=shared), 403, code="not_a_store_member")

    alice = api.auth(t, "alice")
    assert_problem(
        await http.post("/v1/memories", headers=alice, json=MEMORY | {"owner_id": "bob"}), 403, code="owner_mismatch"
    )
    assert_problem(
        await http.post("/v1/memories", headers=alice, json=MEMORY | {"scope": "agent"}),
        403,
        code="user_cannot_write_agent_scope",
    )
    assert_problem(
        await http.post("/v1/memories", headers=alice, json=MEMORY | {"store": "team-notes"}),
        403,
        code="store_only_for_shared_scope",
    )
    # None of it was written.
    for headers in (alice, api.auth(t, "bob")):
        assert (await http.get("/v1/memories", headers=headers)).json()["items"] == []


# -- 404 -------------------------------------------------------------------------------------------


async def test_404_for_unknown_and_foreign_ids_without_revealing_existence(api: Api, http: httpx.AsyncClient) -> None:
    owner = api.auth("t404-a", "alice")
    memory_id = (await remember(http, owner))["memory_id"]
    assert (await http.get(f"/v1/memories/{memory_id}", headers=owner)).status_code == 200

    unknown = assert_problem(await http.get(f"/v1/memories/{uuid.uuid4()}", headers=owner), 404, field="memory_id")
    lookers = {
        "same sub, other tenant": api.auth("t404-b", "alice"),
        "other user, same tenant": api.auth("t404-a", "bob"),
        "agent serving another user": api.auth("t404-a", "svc", "agent", agent="planner", on_behalf_of="bob"),
        "agent of another tenant": api.auth("t404-b", "svc", "agent", agent="planner", on_behalf_of="alice"),
    }
    for who, headers in lookers.items():
        answer = await http.get(f"/v1/memories/{memory_id}", headers=headers)
        problem = assert_problem(answer, 404, field="memory_id")
        # Indistinguishable from an id that never existed: same code, title and detail.
        assert {k: problem[k] for k in ("type", "title", "detail", "code")} == {
            k: unknown[k] for k in ("type", "title", "detail", "code")
        }, who
        assert "Prefers tea" not in answer.text
    # ...and the other tenant's search does not surface it either.
    found = await http.post("/v1/search", headers=lookers["same sub, other tenant"], json={"query": "tea or coffee"})
    assert found.status_code == 200
    assert found.json()["results"] == []

    assert_problem(await http.get("/v1/nothing-here"), 404, code="not_found")
    assert_problem(await http.put("/v1/search", json={}), 405, code="method_not_allowed")


# -- 413 -------------------------------------------------------------------------------------------


async def test_409_when_an_idempotency_key_is_reused_for_other_content(api: Api, http: httpx.AsyncClient) -> None:
    alice = api.auth("t409", "alice")
    first = await remember(http, alice, idempotency_key="k-409")
    again = await remember(http, alice, idempotency_key="k-409")
    assert again["memory_id"] == first["memory_id"] and again["decision"] == first["decision"]
    problem = assert_problem(
        await http.post(
            "/v1/memories", headers=alice, json=MEMORY | {"idempotency_key": "k-409", "content": "Prefers coffee"}
        ),
        409,
        field="idempotency_key",
        code="idempotency_key_reused",
    )
    assert "Prefers coffee" not in str(problem)
    listed = (await http.get("/v1/memories", headers=alice)).json()["items"]
    assert [m["id"] for m in listed] == [first["memory_id"]]
    assert listed[0]["content"] == MEMORY["content"]


async def test_413_for_content_over_the_limit_and_the_limit_itself_is_accepted(
    api: Api, http: httpx.AsyncClient
) -> None:
    limit = api.settings.max_content_chars
    assert limit == 4096
    alice = api.auth("t413", "alice")
    for content in ("y" * (limit + 1), "é" * (limit + 1), "y" * 20_000):
        problem = assert_problem(
            await http.post("/v1/memories", headers=alice, json=MEMORY | {"content": content}),
            413,
            field="content",
            code="content_too_large",
        )
        assert content[:64] not in str(problem)
    # The limit counts characters, not bytes: 4,096 two-byte characters are within it.
    at_limit = await http.post("/v1/memories", headers=alice, json=MEMORY | {"content": "é" * limit})
    assert at_limit.status_code == 200, at_limit.text

    long_query = {"query": "q" * (api.settings.max_query_chars + 1)}
    assert_problem(await http.post("/v1/search", headers=alice, json=long_query), 413, field="query")


async def test_413_for_a_body_over_the_request_limit_declared_or_streamed(api: Api, http: httpx.AsyncClient) -> None:
    alice = api.auth("t413-body", "alice")
    too_big = b'{"content": "' + b"z" * api.settings.max_request_bytes + b'"}'
    headers = alice | {"Content-Type": "application/json"}
    declared = await http.post("/v1/memories", headers=headers, content=too_big)
    assert_problem(declared, 413, field="body", code="request_too_large")

    async def chunks() -> AsyncIterator[bytes]:
        for start in range(0, len(too_big), 8192):
            yield too_big[start : start + 8192]

    streamed = await http.post("/v1/memories", headers=headers, content=chunks())
    assert "content-length" not in {k.lower() for k in streamed.request.headers}, "expected a chunked request"
    assert_problem(streamed, 413, field="body", code="request_too_large")
    # Even without a token: the size limit is enforced before anything reads the body.
    assert_problem(await http.post("/v1/search", content=too_big, headers={"Content-Type": "application/json"}), 413)
    assert (await http.get("/v1/memories", headers=alice)).json()["items"] == []


# -- 422 -------------------------------------------------------------------------------------------

INVALID_MEMORIES: list[tuple[dict[str, Any], str]] = [
    ({k: v for k, v in MEMORY.items() if k != "content"}, "content"),
    ({k: v for k, v in MEMORY.items() if k != "type"}, "type"),
    ({k: v for k, v in MEMORY.items() if k != "source_kind"}, "source_kind"),
    ({k: v for k, v in MEMORY.items() if k != "reason"}, "reason"),
    (MEMORY | {"content": ""}, "content"),
    (MEMORY | {"content": "   \n\t "}, "content"),
    (MEMORY | {"content": None}, "content"),
    (MEMORY | {"content": 42}, "content"),
    (MEMORY | {"type": "opinion"}, "type"),
    (MEMORY | {"source_kind": "rumour"}, "source_kind"),
    (MEMORY | {"scope": "everyone"}, "scope"),
    (MEMORY | {"sensitivity": "secret"}, "sensitivity"),
    (MEMORY | {"importance": 1.5}, "importance"),
    (MEMORY | {"importance": -0.1}, "importance"),
    (MEMORY | {"importance": "high"}, "importance"),
    (MEMORY | {"ttl_seconds": 0}, "ttl_seconds"),
    (MEMORY | {"ttl_seconds": 10**12}, "ttl_seconds"),
    (MEMORY | {"slot": "has spaces"}, "slot"),
    (MEMORY | {"slot": "s" * 129}, "slot"),
    (MEMORY | {"reason": "r" * 65}, "reason"),
    (MEMORY | {"idempotency_key": ""}, "idempotency_key"),
    (MEMORY | {"source_ref": {"system": "crm"}}, "source_ref.key"),
    (MEMORY | {"source_ref": {"system": "bad system!", "key": "k"}}, "source_ref.system"),
    (MEMORY | {"provenance": {"session": "s", "mood": "happy"}}, "provenance.mood"),
    (MEMORY | {"provenance": {"speaker": "n" * 129}}, "provenance.speaker"),
    (MEMORY | {"provenance": {"speaker": ""}}, "provenance.speaker"),
    (MEMORY | {"unexpected": True}, "unexpected"),
    # NUL characters: PostgreSQL cannot store them, so they are bad input on every profile, not a 500.
    (MEMORY | {"content": "tea\u0000coffee"}, "content"),
    (MEMORY | {"reason": "user_stated\u0000"}, "reason"),
    (MEMORY | {"owner_id": "alice\u0000"}, "owner_id"),
    (MEMORY | {"provenance": {"session": "s\u00001"}}, "provenance.session"),
    (MEMORY | {"source_ref": {"system": "crm", "key": "k\u0000"}}, "source_ref.key"),
]


MEMORY_IDS = [f"{i}-{field}" for i, (_, field) in enumerate(INVALID_MEMORIES)]


@pytest.mark.parametrize(("body", "field"), INVALID_MEMORIES, ids=MEMORY_IDS)
async def test_422_names_the_invalid_memory_field(
    api: Api, http: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    answer = await http.post("/v1/memories", headers=api.auth("t422", "alice"), json=body)
    assert_problem(answer, 422, field=field)
    bad = body.get(field.split(".")[0])
    if isinstance(bad, str) and len(bad.strip()) >= 4 and bad != MEMORY.get(field):
        assert bad not in answer.text, "the problem echoes the submitted value"


async def test_422_for_bodies_that_are_not_a_json_object(api: Api, http: httpx.AsyncClient) -> None:
    headers = api.auth("t422", "alice") | {"Content-Type": "application/json"}
    for raw in (b"", b"{", b'{"content": "x",}', b"[]", b'"just a string"', b"null", b"\xff\xfe"):
        answer = await http.post("/v1/memories", headers=headers, content=raw)
        assert_problem(answer, 422, field="body")
    plain = await http.post(
        "/v1/memories", headers=api.auth("t422", "alice") | {"Content-Type": "text/plain"}, content=b"remember tea"
    )
    assert_problem(plain, 422, field="body")
    # Nesting deep enough to exhaust the JSON parser is a client error too.
    deep = b'{"content": "x", "provenance": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"
    assert_problem(await http.post("/v1/memories", headers=headers, content=deep), 400)


INVALID_SEARCHES: list[tuple[dict[str, Any], str]] = [
    ({"k": 3}, "query"),
    ({"query": ""}, "query"),
    ({"query": "tea", "k": 51}, "k"),
    ({"query": "tea", "k": 0}, "k"),
    ({"query": "tea", "k": -3}, "k"),
    ({"query": "tea", "k": "five"}, "k"),
    ({"query": "tea", "k": 10**30}, "k"),
    ({"query": "tea", "types": []}, "types"),
    ({"query": "tea", "types": ["opinion"]}, "types.0"),
    ({"query": "tea", "consequence": "medium"}, "consequence"),
    ({"query": "tea", "filter": {"tenant": "other"}}, "filter"),
    ({"query": ["tea"]}, "query"),
]


@pytest.mark.parametrize(("body", "field"), INVALID_SEARCHES, ids=[f for _, f in INVALID_SEARCHES])
async def test_422_names_the_invalid_search_field(
    api: Api, http: httpx.AsyncClient, body: dict[str, Any], field: str
) -> None:
    answer = await http.post(
        "/v1/search", headers=api.auth("t422", "svc", "agent", agent="a", on_behalf_of="u"), json=body
    )
    assert_problem(answer, 422, field=field)


async def test_k_and_limit_at_their_maximum_are_accepted(api: Api, http: httpx.AsyncClient) -> None:
    alice = api.auth("t-max", "alice")
    found = await http.post("/v1/search", headers=alice, json={"query": "tea", "k": api.settings.max_k})
    assert found.status_code == 200, found.text
    listed = await http.get("/v1/memories", headers=alice, params={"limit": api.settings.max_page_size})
    assert listed.status_code == 200, listed.text


def _cursor(payload: bytes) -> str:
    import base64

    return base64.urlsafe_b64encode(payload).decode().rstrip("=")


INVALID_LISTINGS: list[tuple[dict[str, Any], str]] = [
    ({"limit": 201}, "limit"),
    ({"limit": 0}, "limit"),
    ({"limit": -1}, "limit"),
    ({"limit": "ten"}, "limit"),
    ({"limit": 10**30}, "limit"),
    ({"cursor": "not a cursor!"}, "cursor"),
    ({"cursor": "x" * 513}, "cursor"),
    ({"cursor": ""}, "cursor"),
    ({"cursor": _cursor(b"[1, 2]")}, "cursor"),
    ({"cursor": _cursor(b'{"c": "yesterday", "i": "x"}')}, "cursor"),
    ({"cursor": _cursor(b'{"c": "2026-01-01T00:00:00", "i": "x"}')}, "cursor"),
    ({"cursor": _cursor(b'{"c": "2026-01-01T00:00:00+00:00", "i": 7}')}, "cursor"),
    ({"cursor": _cursor(b'{"s": 5}')}, "cursor"),
    ({"cursor": _cursor(b"\xff\xfe")}, "cursor"),
    ({"status": "bogus"}, "status.0"),
]


@pytest.mark.parametrize(("params", "field"), INVALID_LISTINGS, ids=[str(p)[:40] for p, _ in INVALID_LISTINGS])
async def test_422_names_the_invalid_listing_parameter(
    api: Api, http: httpx.AsyncClient, params: dict[str, Any], field: str
) -> None:
    answer = await http.get("/v1/memories", headers=api.auth("t422", "alice"), params=params)
    assert_problem(answer, 422, field=field)


# -- no 500s, nothing written ---------------------------------------------------------------------


async def test_odd_input_is_never_a_500(api: Api, http: httpx.AsyncClient) -> None:
    alice = api.auth("t-odd", "alice")
    bodies: list[Any] = [
        MEMORY | {"content": "tea\u0000coffee"},
        MEMORY | {"content": "🫖" * 100},
        MEMORY | {"provenance": {"session": "s" * 10_000}},
        MEMORY | {"source_ref": {"system": "crm", "key": "k" * 300}},
        MEMORY | {"idempotency_key": "\u0000"},
        MEMORY | {"owner_id": "a" * 1000},
        {"content": {"nested": ["deep"] * 100}},
    ]
    for body in bodies:
        answer = await http.post("/v1/memories", headers=alice, json=body)
        assert answer.status_code < 500, f"{answer.status_code} for {str(body)[:80]}: {answer.text[:300]}"
        if answer.status_code >= 400:
            assert_problem(answer, answer.status_code)
    headers = alice | {"Content-Type": "application/json"}
    deep = b'{"content": "x", "provenance": ' + b"[" * 20_000 + b"]" * 20_000 + b"}"
    # A lone surrogate is valid JSON (an escape) but cannot be stored as UTF-8; httpx will not send one itself.
    raws = [
        deep,
        b'{"content": "x", "importance": 1e400, "type": "fact"}',
        json.dumps(MEMORY | {"importance": float("nan")}).encode(),  # Python's json reads NaN
        json.dumps(MEMORY | {"ttl_seconds": float("inf")}).encode(),
        json.dumps(MEMORY | {"content": "tea \ud800 coffee"}).encode(),
        json.dumps(MEMORY | {"slot": "\ud800"}).encode(),
        json.dumps(MEMORY | {"idempotency_key": "k\ud800"}).encode(),
    ]
    for raw in raws:
        answer = await http.post("/v1/memories", headers=headers, content=raw)
        assert answer.status_code < 500, f"{answer.status_code} for {raw[:60]!r}: {answer.text[:300]}"
        if answer.status_code >= 400:
            assert_problem(answer, answer.status_code)
    for query in ("\u0000", "\ud800", "🫖", "' OR 1=1 --", "*" * 2048):
        answer = await http.post("/v1/search", headers=headers, content=json.dumps({"query": query}).encode())
        assert answer.status_code < 500, f"{answer.status_code} for search {query[:20]!r}: {answer.text[:300]}"
    for memory_id in ("x" * 5000, "..%2F..%2Fetc", "🫖", "' OR 1=1 --"):
        answer = await http.get(f"/v1/memories/{memory_id}", headers=alice)
        assert_problem(answer, 404)
    # A control character is refused wherever it is, the path included (api/input_guard.py).
    assert_problem(await http.get("/v1/memories/%00", headers=alice), 422, field="path")


async def test_a_rejected_request_writes_nothing(api: Api, http: httpx.AsyncClient) -> None:
    tenant = "t-nothing"
    alice = api.auth(tenant, "alice")
    agent = api.auth(tenant, "svc", "agent", agent="planner", on_behalf_of="alice")
    rejected = [
        (413, alice, MEMORY | {"content": "t" * 4097}),
        (422, alice, MEMORY | {"content": "   "}),
        (422, alice, MEMORY | {"content": "tea\u0000"}),
        (422, alice, MEMORY | {"type": "opinion"}),
        (403, alice, MEMORY | {"owner_id": "bob"}),
        (403, agent, MEMORY | {"owner_id": "bob"}),
        (403, api.auth(tenant, "ops", "operator"), MEMORY),
        (401, {"Authorization": "Bearer nope"}, MEMORY),
    ]
    for status, headers, body in rejected:
        assert_problem(await http.post("/v1/memories", headers=headers, json=body), status)
    too_big = {"Content-Type": "application/json"} | alice
    assert (await http.post("/v1/memories", headers=too_big, content=b"{" + b" " * 70_000 + b"}")).status_code == 413

    for headers in (alice, agent, api.auth(tenant, "bob")):
        listed = await http.get("/v1/memories", headers=headers, params=[("status", s) for s in STATUSES])
        assert listed.status_code == 200
        assert listed.json() == {"items": [], "next_cursor": None}
    async with api.store.engine.connect() as conn:
        rows = await conn.scalar(sa.select(sa.func.count()).select_from(memories).where(memories.c.tenant_id == tenant))
        parked = await conn.scalar(
            sa.select(sa.func.count()).select_from(candidates).where(candidates.c.tenant_id == tenant)
        )
    assert (rows, parked) == (0, 0), "a rejected request left a memory or a parked candidate behind"


STATUSES = [s.value for s in Status]


# -- pagination ------------------------------------------------------------------------------------


async def _pages(http: httpx.AsyncClient, headers: dict[str, str], limit: int) -> list[list[dict[str, Any]]]:
    pages: list[list[dict[str, Any]]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        answer = await http.get("/v1/memories", headers=headers, params=params)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        pages.append(body["items"])
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
        assert len(pages) < 50, "pagination does not end"


async def test_pagination_over_several_pages_has_no_duplicates_or_gaps(api: Api, http: httpx.AsyncClient) -> None:
    pat = api.auth("t-pages", "pat")
    facts = [
        "Pat's favourite colour is green",
        "Pat plays the cello in an amateur orchestra",
        "Pat's daughter is called Ines",
        "Pat drives an old blue Volvo",
        "Pat prefers meetings after 10am",
        "Pat is learning Japanese",
        "Pat runs a marathon every spring",
    ]
    written = []
    for fact in facts:
        answer = await remember(http, pat, content=fact, type="fact")
        assert answer["decision"] in ("ADD", "PENDING"), answer  # both are listed by default
        written.append(answer["memory_id"])

    pages = await _pages(http, pat, limit=3)
    assert [len(p) for p in pages] == [3, 3, 1]
    ids = [item["id"] for page in pages for item in page]
    assert len(ids) == len(set(ids)), "a memory appeared on two pages"
    assert ids == list(reversed(written)), "listing is not newest first, or skipped one"
    # A page size that divides the total exactly ends without an empty extra page.
    assert [len(p) for p in await _pages(http, pat, limit=7)] == [7]
    # Someone else in the tenant pages through nothing.
    assert await _pages(http, api.auth("t-pages", "quinn"), limit=3) == [[]]


async def test_pagination_with_identical_timestamps(api: Api, http: httpx.AsyncClient) -> None:
    """Keyset paging must break created_at ties by id, or rows are skipped or repeated."""
    tenant, at = "t-ties", datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    ids = sorted(str(uuid.uuid4()) for _ in range(5))
    for i, memory_id in enumerate(ids):
        content = f"tied memory number {i}"
        await api.store.insert_memory(
            MemoryRecord(
                id=memory_id,
                tenant_id=tenant,
                owner_id="tia",
                type=MemoryType.FACT,
                content=content,
                content_hash=content_hash(content),
                source_kind=SourceKind.USER,
                reason="user_stated_fact",
                created_at=at,
                updated_at=at,
            )
        )
    pages = await _pages(http, api.auth(tenant, "tia"), limit=2)
    assert [len(p) for p in pages] == [2, 2, 1]
    assert [item["id"] for page in pages for item in page] == list(reversed(ids))


# -- health, readiness, OpenAPI -------------------------------------------------------------------


async def test_health_readiness_and_openapi(api: Api, http: httpx.AsyncClient) -> None:
    assert (await http.get("/healthz")).json() == {"status": "ok"}
    ready = await http.get("/readyz")
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ready", "checks": {"temporal": True, "store": True, "index": True}}

    spec = (await http.get("/openapi.json")).json()
    assert spec["openapi"].startswith("3.")
    paths = spec["paths"]
    assert {"post", "get"} <= set(paths["/v1/memories"])
    assert "post" in paths["/v1/search"]
    assert "get" in paths["/v1/memories/{memory_id}"]
    assert {"/healthz", "/readyz"} <= set(paths)
    listing = {p["name"]: p for p in paths["/v1/memories"]["get"]["parameters"]}
    assert {"limit", "cursor", "status"} <= set(listing)


async def test_readyz_is_a_503_problem_when_no_worker_serves_the_queue(api: Api) -> None:
    """Readiness must not claim the index is up when no worker can answer for it."""
    settings = api.settings.model_copy(
        update={
            "temporal_task_queue": f"nobody-{uuid.uuid4().hex[:6]}",
            "api_port": free_port(),
            "readiness_timeout_seconds": 1.5,  # the worker check's wait for nobody, shorter than the default
        }
    )
    client = await connect(settings)
    app = create_app(settings, temporal=client, store=api.store)
    servers: list[uvicorn.Server] = []
    serving = asyncio.create_task(run_api(settings, servers, app))
    try:
        while not (servers and servers[0].started):
            assert not serving.done()
            await asyncio.sleep(0.05)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{settings.api_port}", timeout=30) as other:
            answer = await other.get("/readyz")
        problem = assert_problem(answer, 503, code="not_ready")
        assert problem["checks"] == {"temporal": True, "store": True, "index": False}
    finally:
        servers[0].should_exit = True
        await asyncio.wait_for(serving, 15)
