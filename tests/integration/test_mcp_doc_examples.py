"""The MCP and OpenAI Agents examples in the docs run, as written, against the real embedded stack.

Each fenced python block preceded by `<!-- example: NAME -->` is run in a child interpreter with
`MEMWARDEN_URL` and `MEMWARDEN_TOKEN` set, as a reader would run it; its output must show what the
text says it shows. (The lead splices docs/integrations-mcp-section.md into docs/integrations.md:
DOC then points there.)
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.integration.api_stack import Api, embedded_api

REPO_ROOT = Path(__file__).resolve().parents[2]
DOC = REPO_ROOT / "docs" / "integrations-mcp-section.md"
EXAMPLE = re.compile(r"<!-- example: ([\w-]+) -->\s*```python\n(.*?)^```", re.S | re.M)
TOOLS = (
    "['confirm_memory', 'decline_memory', 'deletion_receipt', 'forget_memory', 'list_memories', 'recall', 'remember']"
)
EXPECTED = {
    "mcp": [TOOLS, "ADD accepted", "Prefers tea to coffee"],
    "openai-agents": [TOOLS, "ADD", "Flies with an aisle seat", "assistant has 7 tools"],
}


def examples() -> dict[str, str]:
    return dict(EXAMPLE.findall(DOC.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    async with embedded_api(tmp_path_factory.mktemp("mcp-docs")) as stack:
        yield stack


def test_the_doc_has_both_examples() -> None:
    assert set(examples()) == set(EXPECTED)


@pytest.mark.parametrize("name", list(EXPECTED))
async def test_the_example_runs_against_the_stack(api: Api, name: str, tmp_path: Path) -> None:
    t = f"t-{uuid.uuid4().hex[:10]}"
    claims = {"agent": "planner", "on_behalf_of": "alice"} if name == "openai-agents" else {}
    token = api.token(t, "planner-svc" if claims else "alice", "agent" if claims else "user", **claims)
    script = tmp_path / f"example_{name.replace('-', '_')}.py"  # not mcp.py: it would shadow the SDK
    script.write_text(examples()[name], encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMWARDEN_", "OPENAI_"))}
    env |= {"MEMWARDEN_URL": api.base_url, "MEMWARDEN_TOKEN": token, "PYTHONPATH": str(REPO_ROOT)}
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        str(script),
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(child.communicate(), 180)  # the stack serves while the child runs
    assert child.returncode == 0, err.decode()[-3000:]
    text = out.decode()
    for expected in EXPECTED[name]:
        assert expected in text, (expected, text)
