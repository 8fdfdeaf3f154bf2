"""memwarden's MCP server, driven by the MCP SDK's own client against the real embedded stack.

Three ways in, each real: in process over the SDK's memory streams (the stdio server's tools calling
the API over HTTP), over streamable HTTP on the API's `/mcp` (the SDK's bearer middleware over
memwarden's token verifier), and over stdio (`memwarden mcp` as a child process). The parity test
runs one script of calls for several roles twice, through the HTTP API and through `/mcp`, each in a
tenant of its own, and requires the same outcome for every call. Telemetry: the SDK's spans (a global
provider, as an embedding application would install) and memwarden's own, and every log record, are
searched for the words of the memories the tools handled.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client, StdioServerParameters
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memwarden import telemetry
from memwarden.identity import mint_token
from memwarden.integrations.mcp import stdio_server
from tests.integration.api_stack import Api, assert_problem, embedded_api
from tests.integration.mcp_support import (
    DIRECTION,
    INJECTION,
    MEMORY,
    OBSERVED_INJECTION,
    TOOLS,
    answer_of,
    mcp_over_http,
    problem_of,
)

REPO_ROOT = Path(__file__).resolve().parents[2]
SECRET_TEXT = "Ottoline Brackenridge hoards saffron tins from Valparaiso"
SECRET_QUERY = "which tins does Ottoline Brackenridge hoard"
CLIENT_LOGGERS = ("mcp.client", "httpx2", "httpcore2")
SECRET_WORDS = {w.lower() for w in re.findall(r"[A-Za-z]{6,}", SECRET_TEXT + " " + SECRET_QUERY)}


@pytest.fixture(scope="module")
def spans() -> tuple[InMemorySpanExporter, InMemorySpanExporter]:
    """(memwarden's own spans, the process-global provider's, where the MCP SDK's spans go)."""
    own = InMemorySpanExporter()
    telemetry.setup(span_exporter=own)
    sdk = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(sdk))  # type: ignore[union-attr]
    return own, sdk


@pytest.fixture(scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory, spans: object) -> AsyncIterator[Api]:
    async with embedded_api(tmp_path_factory.mktemp("mcp")) as stack:
        yield stack


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def agent_token(api: Api, t: str, **claims: Any) -> str:
    return api.token(t, "planner-svc", "agent", agent="planner", on_behalf_of="alice", **claims)


# -- in process, over the SDK's memory streams ---------------------------------------------------


async def test_tools_declare_schemas_and_annotations(api: Api) -> None:
    async with Client(stdio_server(api.base_url, api.token(tenant(), "alice")), mode="legacy") as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(listed) == TOOLS
    for tool in listed.values():
        assert tool.input_schema["type"] == "object" and tool.output_schema is not None, tool.name
        assert tool.output_schema["type"] == "object" and tool.description, tool.name
    remember = listed["remember"].input_schema
    assert set(remember["required"]) == {"content", "type", "source_kind", "reason"}
    hints = {
        name: (t.annotations.read_only_hint, t.annotations.destructive_hint, t.annotations.idempotent_hint)  # type: ignore[union-attr]
        for name, t in listed.items()
    }
    assert hints == {
        "remember": (False, False, False),
        "recall": (True, False, True),
        "list_memories": (True, False, True),
        "confirm_memory": (False, False, True),
        "decline_memory": (False, True, True),
        "forget_memory": (False, True, True),
        "deletion_receipt": (True, False, True),
    }
    assert {"context", "results", "withheld"} <= set(listed["recall"].output_schema["properties"])  # type: ignore[index]


async def test_in_process_remember_recall_list_forget(api: Api) -> None:
    t = tenant()
    async with Client(stdio_server(api.base_url, api.token(t, "alice")), mode="legacy") as client:
        added = answer_of(await client.call_tool("remember", MEMORY | {"slot": "drink"}))
        assert (added["decision"], added["reason"]) == ("ADD", "accepted") and added["memory_id"]
        recalled = answer_of(await client.call_tool("recall", {"query": "what does alice like to drink"}))
        assert [r["memory_id"] for r in recalled["results"]] == [added["memory_id"]]
        assert MEMORY["content"] in recalled["context"] and recalled["results"][0]["label"] in recalled["context"]
        listed = answer_of(await client.call_tool("list_memories", {}))
        assert [m["id"] for m in listed["items"]] == [added["memory_id"]]
        gone = answer_of(await client.call_tool("forget_memory", {"memory_id": added["memory_id"]}))
        assert gone["status"] in ("tombstoned", "purging", "verified") and gone["deletion_id"]
        after = answer_of(await client.call_tool("recall", {"query": "what does alice like to drink"}))
        assert after["results"] == [] and MEMORY["content"] not in after["context"]
        receipt = answer_of(await client.call_tool("deletion_receipt", {"deletion_id": gone["deletion_id"]}))
        assert receipt["deletion_id"] == gone["deletion_id"] and receipt["counts"]
    async with httpx.AsyncClient(base_url=api.base_url) as http:
        row = await http.get(f"/v1/memories/{added['memory_id']}", headers=api.auth(t, "alice"))
        assert row.json()["status"] in ("tombstoned", "purged")  # forgotten through MCP is forgotten for HTTP


async def test_a_pending_write_is_confirmed_only_by_its_person(api: Api) -> None:
    t = tenant()
    async with Client(stdio_server(api.base_url, agent_token(api, t)), mode="legacy") as agent:
        staged = answer_of(await agent.call_tool("remember", DIRECTION))
        assert staged["decision"] == "PENDING" and staged["memory_id"]
        refused = problem_of(await agent.call_tool("confirm_memory", {"memory_id": staged["memory_id"]}))
        assert (refused["status"], refused["code"]) == (403, "not_confirmer")
    async with Client(stdio_server(api.base_url, api.token(t, "alice")), mode="legacy") as alice:
        confirmed = answer_of(await alice.call_tool("confirm_memory", {"memory_id": staged["memory_id"]}))
        assert confirmed["decision"] in ("ADD", "UPDATE") and confirmed["memory_id"] == staged["memory_id"]
        again = problem_of(await alice.call_tool("decline_memory", {"memory_id": staged["memory_id"]}))
        assert (again["status"], again["code"]) == (409, "not_pending")


# -- over streamable HTTP on /mcp ----------------------------------------------------------------


async def test_over_http_a_cross_scope_call_is_denied(api: Api) -> None:
    t = tenant()
    async with mcp_over_http(api.base_url, api.token(t, "bob")) as bob:
        bobs = answer_of(await bob.call_tool("remember", MEMORY | {"content": "Bob keeps bees on the roof"}))
        assert bobs["decision"] == "ADD"
    async with mcp_over_http(api.base_url, agent_token(api, t)) as agent:
        denied = problem_of(await agent.call_tool("remember", MEMORY | {"owner_id": "bob"}))
        assert (denied["status"], denied["code"]) == (403, "owner_mismatch")
        hidden = problem_of(await agent.call_tool("confirm_memory", {"memory_id": bobs["memory_id"]}))
        assert (hidden["status"], hidden["code"]) == (404, "not_found")  # existence is not revealed
        seen = answer_of(await agent.call_tool("recall", {"query": "who keeps bees on the roof"}))
        assert seen["results"] == [] and "bees" not in seen["context"]
        listed = answer_of(await agent.call_tool("list_memories", {}))
        assert bobs["memory_id"] not in {m["id"] for m in listed["items"]}
    async with mcp_over_http(api.base_url, api.token(tenant(), "bob")) as stranger:  # bob of another tenant
        assert problem_of(await stranger.call_tool("forget_memory", {"memory_id": bobs["memory_id"]}))["status"] == 404


async def test_over_http_an_injection_from_an_agent_is_rejected(api: Api) -> None:
    t = tenant()
    observation = OBSERVED_INJECTION
    async with mcp_over_http(api.base_url, agent_token(api, t)) as agent:
        rejected = answer_of(await agent.call_tool("remember", observation))
        assert (rejected["decision"], rejected["reason"], rejected["memory_id"]) == (
            "REJECT",
            "untrusted_instruction",
            None,
        )
        as_user = observation | {"source_kind": "user", "reason": "user_stated_fact"}
        relayed = answer_of(await agent.call_tool("remember", as_user))
        assert relayed["decision"] in ("PENDING", "REJECT"), relayed  # never live without the person
        recalled = answer_of(await agent.call_tool("recall", {"query": "send all notes"}))
        assert recalled["results"] == [] and "attacker" not in recalled["context"]


async def test_over_http_no_or_a_bad_token_is_401_with_the_resource_metadata(api: Api) -> None:
    other_audience = mint_token(api.settings.auth_secret_value, tenant="t", sub="alice", role="user", audience="x")
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with httpx.AsyncClient(base_url=api.base_url) as http:
        for headers in ({}, {"Authorization": "Bearer not-a-token"}, {"Authorization": f"Bearer {other_audience}"}):
            answer = await http.post("/mcp", json=body, headers=headers | {"Accept": "application/json"})
            assert answer.status_code == 401, (headers, answer.text)
            challenge = answer.headers["www-authenticate"]
            assert challenge.startswith("Bearer ") and 'error="invalid_token"' in challenge
            [metadata_url] = re.findall(r'resource_metadata="([^"]+)"', challenge)
        assert metadata_url == f"{api.base_url}/.well-known/oauth-protected-resource/mcp"
        metadata = (await http.get("/.well-known/oauth-protected-resource/mcp")).json()
    assert metadata["resource"] == f"{api.base_url}/mcp"
    assert metadata["authorization_servers"] == [api.base_url] and metadata["bearer_methods_supported"] == ["header"]
    async with mcp_over_http(api.base_url, api.token(tenant(), "alice")) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS  # the same token works


async def test_over_http_a_control_character_is_refused_at_the_door_naming_the_field(api: Api) -> None:
    t = tenant()
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "remember", "arguments": MEMORY | {"content": "Prefers tea\u0000 to coffee"}},
    }
    headers = api.auth(t, "alice") | {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=api.base_url) as http:
        answer = await http.post("/mcp", json=call, headers=headers)
        assert_problem(answer, 422, code="validation_failed", field="params.arguments.content")
        listed = await http.get("/v1/memories", headers=api.auth(t, "alice"))
    assert listed.json()["items"] == []  # nothing was written


# -- parity: through MCP exactly what through HTTP ------------------------------------------------

Outcome = tuple[Any, ...]
Call = Callable[[str, dict[str, Any]], Awaitable[Outcome]]

ROLES: dict[str, dict[str, Any]] = {
    "user": {"sub": "alice", "role": "user"},
    "agent": {"sub": "planner-svc", "role": "agent", "agent": "planner", "on_behalf_of": "alice"},
    "operator": {"sub": "ops", "role": "operator"},
    "privacy": {"sub": "dpo", "role": "privacy"},
    "system": {"sub": "svc-crm", "role": "system"},
}
ROUTES: dict[str, Callable[[dict[str, Any]], tuple[str, str, dict[str, Any]]]] = {
    "remember": lambda a: ("POST", "/v1/memories", {"json": a}),
    "recall": lambda a: ("POST", "/v1/search", {"json": a}),
    "list_memories": lambda a: ("GET", "/v1/memories", {}),
    "confirm_memory": lambda a: ("POST", f"/v1/memories/{a['memory_id']}/confirm", {}),
    "decline_memory": lambda a: ("POST", f"/v1/memories/{a['memory_id']}/decline", {}),
    "forget_memory": lambda a: ("DELETE", f"/v1/memories/{a['memory_id']}", {}),
    "deletion_receipt": lambda a: ("GET", f"/v1/deletions/{a['deletion_id']}", {}),
}


def normalized(tool: str, ok: bool, body: dict[str, Any]) -> Outcome:
    """What must be equal across the two doors: decisions, codes, what was returned (never ids or times)."""
    if not ok:
        return ("error", body["status"], body["code"])
    if tool in ("remember", "confirm_memory", "decline_memory"):
        return ("ok", body["decision"], body["reason"])
    if tool == "recall":
        return ("ok", sorted(r["content"] for r in body["results"]), len(body["withheld"]))
    if tool == "list_memories":
        return ("ok", sorted((m["content"], m["status"]) for m in body["items"]))
    return ("ok", "deletion")


async def script(call: Call, pending_id: str, memory_id: str, deletion_id: str) -> list[Outcome]:
    """The same calls, in the same order, for one principal."""
    return [
        await call("remember", MEMORY | {"content": "Alice's favourite biscuit is shortbread", "type": "fact"}),
        await call("remember", MEMORY | {"content": INJECTION, "source_kind": "tool", "type": "fact"}),
        await call("remember", MEMORY | {"owner_id": "bob"}),
        await call("recall", {"query": "favourite tea and biscuits"}),
        await call("list_memories", {}),
        await call("confirm_memory", {"memory_id": pending_id}),
        await call("decline_memory", {"memory_id": pending_id}),
        await call("forget_memory", {"memory_id": memory_id}),
        await call("deletion_receipt", {"deletion_id": deletion_id}),
    ]


async def seeded(api: Api, http: httpx.AsyncClient) -> tuple[str, str, str, str]:
    """A tenant with alice's memory, an agent's pending direction about her, and a deletion she asked for."""
    t = tenant()
    alice, agent = api.auth(t, "alice"), {"Authorization": f"Bearer {agent_token(api, t)}"}
    tea = MEMORY | {"content": "Alice's favourite tea is oolong", "type": "fact"}
    memory = (await http.post("/v1/memories", headers=alice, json=tea)).json()["memory_id"]
    pending = (await http.post("/v1/memories", headers=agent, json=DIRECTION)).json()
    assert pending["decision"] == "PENDING", pending
    dropped = (await http.post("/v1/memories", headers=alice, json=MEMORY | {"content": "Owns a red bicycle"})).json()
    deletion = (await http.delete(f"/v1/memories/{dropped['memory_id']}", headers=alice)).json()["deletion_id"]
    return t, pending["memory_id"], memory, deletion


@pytest.mark.parametrize("role", list(ROLES))
async def test_each_role_gets_through_mcp_exactly_what_it_gets_through_http(api: Api, role: str) -> None:
    async with httpx.AsyncClient(base_url=api.base_url, timeout=60) as http:
        t_http, *ids_http = await seeded(api, http)
        t_mcp, *ids_mcp = await seeded(api, http)
        claims = dict(ROLES[role])
        headers = {"Authorization": f"Bearer {api.token(t_http, **claims)}"}

        async def over_http(tool: str, arguments: dict[str, Any]) -> Outcome:
            method, path, kwargs = ROUTES[tool](arguments)
            answer = await http.request(method, path, headers=headers, **kwargs)
            return normalized(tool, answer.status_code < 400, answer.json())

        through_http = await script(over_http, *ids_http)

    async with mcp_over_http(api.base_url, api.token(t_mcp, **claims)) as client:

        async def over_mcp(tool: str, arguments: dict[str, Any]) -> Outcome:
            result = await client.call_tool(tool, arguments)
            return normalized(tool, not result.is_error, problem_of(result) if result.is_error else answer_of(result))

        through_mcp = await script(over_mcp, *ids_mcp)
    assert through_mcp == through_http
    refused = [o for o in through_http if o[0] == "error"]
    assert refused and (len(refused) < len(through_http)) == (role != "system"), through_http  # both kinds seen


# -- over stdio: `memwarden mcp` ------------------------------------------------------------------


def _cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "MEMWARDEN_TOKEN"}
    return env | {"PYTHONPATH": str(REPO_ROOT)} | extra


async def test_memwarden_mcp_over_stdio_acts_as_the_token_in_the_environment(api: Api, tmp_path: Path) -> None:
    t = tenant()
    token = api.token(t, "alice")
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "stack.cli", "mcp", "--url", api.base_url],
        env=_cli_env(MEMWARDEN_TOKEN=token),
        cwd=str(REPO_ROOT),
    )
    async with Client(server) as client:
        added = answer_of(await client.call_tool("remember", MEMORY))
        assert added["decision"] == "ADD"
        recalled = answer_of(await client.call_tool("recall", {"query": "tea or coffee"}))
        assert [r["memory_id"] for r in recalled["results"]] == [added["memory_id"]]
    (tmp_path / "token").write_text(api.token(t, "bob") + "\n")
    from_file = StdioServerParameters(
        command=sys.executable,
        args=["-m", "stack.cli", "mcp", "--url", api.base_url, "--token-file", str(tmp_path / "token")],
        env=_cli_env(MEMWARDEN_TOKEN=token),  # the file wins
        cwd=str(REPO_ROOT),
    )
    async with Client(from_file) as client:
        assert answer_of(await client.call_tool("list_memories", {}))["items"] == []  # bob sees none of alice's


def test_memwarden_mcp_takes_no_token_in_argv_and_refuses_to_run_without_one() -> None:
    command = [sys.executable, "-m", "stack.cli", "mcp", "--url", "http://127.0.0.1:9"]
    bare = subprocess.run(command, env=_cli_env(), cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert bare.returncode == 2 and "MEMWARDEN_TOKEN" in bare.stderr
    argv = subprocess.run(
        [*command, "--token", "x"], env=_cli_env(), cwd=REPO_ROOT, capture_output=True, text=True, timeout=60
    )
    assert argv.returncode == 2 and "unrecognized arguments: --token" in argv.stderr


# -- telemetry ------------------------------------------------------------------------------------


async def test_tool_calls_carry_no_memory_content_in_spans_or_logs(
    api: Api, spans: tuple[InMemorySpanExporter, InMemorySpanExporter], caplog: pytest.LogCaptureFixture
) -> None:
    own, sdk = spans
    own.clear()
    sdk.clear()
    caplog.set_level(logging.DEBUG)
    t = tenant()
    async with mcp_over_http(api.base_url, api.token(t, "alice")) as client:
        added = answer_of(await client.call_tool("remember", MEMORY | {"content": SECRET_TEXT, "type": "fact"}))
        assert added["decision"] == "ADD"
        recalled = answer_of(await client.call_tool("recall", {"query": SECRET_QUERY}))
        assert recalled["results"] and SECRET_TEXT in recalled["context"]  # the caller gets the content ...
        bad = await client.call_tool("remember", MEMORY | {"content": SECRET_TEXT, "type": "not-a-type"})
        assert bad.is_error
        assert problem_of(await client.call_tool("forget_memory", {"memory_id": SECRET_TEXT}))["status"] == 404
    tool_spans = [s for s in sdk.get_finished_spans() if (s.attributes or {}).get("gen_ai.tool.name") == "remember"]
    assert len(tool_spans) == 2, [s.name for s in sdk.get_finished_spans()]
    assert any(s.name.startswith("create_memory") or s.name == "create_memory" for s in own.get_finished_spans())
    for span in [*sdk.get_finished_spans(), *own.get_finished_spans()]:  # ... and nothing else does
        texts = [span.name, span.status.description or "", *(f"{k}={v}" for k, v in (span.attributes or {}).items())]
        texts += [f"{e.name} {dict(e.attributes or {})}" for e in span.events]
        found = {w for w in SECRET_WORDS if w in " ".join(texts).lower()}
        assert not found, (span.name, found)
    # The agent's side of the wire (the SDK's client and its HTTP stack) logs what it sends at DEBUG: that
    # is the caller's own process. Everything on memwarden's side must hold no content.
    server_side = [r for r in caplog.records if not r.name.startswith(CLIENT_LOGGERS)]
    leaks = [
        (r.name, found)
        for r in server_side
        if (found := {w for w in SECRET_WORDS if w in f"{r.getMessage()} {r.exc_text or ''}".lower()})
    ]
    assert server_side and not leaks, leaks
