"""An OpenAI Agents SDK agent reaches memwarden through its MCP server connection, no model involved.

The SDK's own `MCPServerStreamableHttp` connects to the API's `/mcp` with a memwarden bearer token,
lists the tools and calls them; then the agent's tool plumbing (`Agent.get_all_tools`, the
`FunctionTool` each MCP tool becomes, its `on_invoke_tool`) runs a call exactly as the Runner would
after a model chose it. The stack is the real embedded one; no model is called.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator

import pytest
from agents import Agent, FunctionTool, RunContextWrapper
from agents.mcp import MCPServerStreamableHttp
from agents.tool_context import ToolContext
from mcp.shared.exceptions import MCPError

from tests.integration.api_stack import Api, embedded_api
from tests.integration.mcp_support import MEMORY, OBSERVED_INJECTION, TOOLS


@pytest.fixture(scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    async with embedded_api(tmp_path_factory.mktemp("mcp-agents")) as stack:
        yield stack


def connection(api: Api, token: str) -> MCPServerStreamableHttp:
    return MCPServerStreamableHttp(
        params={"url": f"{api.base_url}/mcp", "headers": {"Authorization": f"Bearer {token}"}, "timeout": 60},
        name="memwarden",
        client_session_timeout_seconds=60,
        use_structured_content=True,
    )


async def test_an_agents_mcp_connection_lists_and_calls_memwardens_tools(api: Api) -> None:
    t = f"t-{uuid.uuid4().hex[:10]}"
    agent_token = api.token(t, "planner-svc", "agent", agent="planner", on_behalf_of="alice")
    async with connection(api, agent_token) as server:
        tools = {tool.name: tool for tool in await server.list_tools()}
        assert set(tools) == TOOLS
        assert tools["recall"].annotations is not None and tools["recall"].annotations.read_only_hint is True
        assert tools["forget_memory"].annotations.destructive_hint is True  # type: ignore[union-attr]

        added = await server.call_tool("remember", MEMORY)
        assert not added.is_error and added.structured_content is not None
        assert added.structured_content["decision"] == "ADD"
        injected = await server.call_tool("remember", OBSERVED_INJECTION)
        assert (injected.structured_content or {}).get("reason") == "untrusted_instruction"
        denied = await server.call_tool("remember", MEMORY | {"owner_id": "bob"})
        assert denied.is_error and '"code": "owner_mismatch"' in denied.content[0].text  # type: ignore[union-attr]

        # What the Runner does once a model picks a tool: the agent's MCP tools become FunctionTools.
        agent = Agent(name="assistant", instructions="Use memwarden for memory.", mcp_servers=[server])
        context = RunContextWrapper(context=None)
        function_tools = {t.name: t for t in await agent.get_all_tools(context) if isinstance(t, FunctionTool)}
        assert TOOLS <= set(function_tools)
        arguments = json.dumps({"query": "does alice prefer tea or coffee"})
        call = ToolContext(context=None, tool_name="recall", tool_call_id="call-1", tool_arguments=arguments)
        output = await function_tools["recall"].on_invoke_tool(call, arguments)
    answer = json.loads(output if isinstance(output, str) else json.dumps(output))
    recalled = answer.get("structuredContent", answer) if isinstance(answer, dict) else answer
    assert [r["memory_id"] for r in recalled["results"]] == [added.structured_content["memory_id"]]
    assert MEMORY["content"] in recalled["context"] and "attacker" not in recalled["context"]


async def test_an_agents_mcp_connection_without_a_valid_token_is_refused(api: Api) -> None:
    listed: list[object] = []
    with pytest.raises(Exception) as refused:  # the SDK groups the transport's refusal
        async with connection(api, "not-a-token") as server:
            listed.extend(await server.list_tools())
    assert listed == [] and refused.group_contains(MCPError)  # the 401 is the SDK's "error response"
