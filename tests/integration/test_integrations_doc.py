"""Every example in docs/integrations.md runs against the embedded stack and prints what the page shows.

An example is an HTML comment `<!-- example: NAME -->`, then an `sh` block whose
`export VAR=$(memwarden token ...)` lines mint its tokens (parsed with the `memwarden` command's own
parser, in a tenant of the example's own), then a `python` block, then `Output:` and a `text` block.
The Python runs in a fresh interpreter, as a reader would run it, with `MEMWARDEN_URL` and the minted
tokens in its environment; its standard output must be the text block, line for line.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import sys
import uuid
from asyncio.subprocess import PIPE
from dataclasses import dataclass
from pathlib import Path

import pytest

from memwarden.identity import mint_token
from stack.cli import parser
from tests.integration.api_stack import Api

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "integrations.md"

EXAMPLE = re.compile(
    r"<!-- example: (?P<name>[\w-]+) -->\s*"
    r"```sh\n(?P<sh>.*?)```\s*"
    r"```python\n(?P<python>.*?)```\s*"
    r"Output:\s*```text\n(?P<output>.*?)```",
    re.DOTALL,
)
TOKEN = re.compile(r"^export (?P<var>[A-Z_]+)=\$\(memwarden token (?P<args>[^)]*)\)$")


@dataclass(frozen=True)
class Example:
    name: str
    tokens: dict[str, list[str]]
    python: str
    output: str


def examples() -> list[Example]:
    text = DOC.read_text()
    found = []
    for match in EXAMPLE.finditer(text):
        tokens: dict[str, list[str]] = {}
        for line in match["sh"].strip().splitlines():
            token = TOKEN.match(line.strip())
            assert token, f"example {match['name']}: the sh block only mints tokens, got {line!r}"
            tokens[token["var"]] = shlex.split(token["args"])
        found.append(Example(match["name"], tokens, match["python"], match["output"]))
    return found


def test_the_page_marks_an_example_per_framework() -> None:
    names = [e.name for e in examples()]
    assert len(names) == len(set(names)) and {"langgraph", "adk"} <= set(names)
    assert DOC.read_text().count("<!-- example:") == len(names), "an example comment not followed by sh/python/output"


def mint(api: Api, tenant: str, args: list[str]) -> str:
    parsed = parser().parse_args(["token", *args])
    return mint_token(
        api.settings.auth_secret_value,
        tenant=tenant,  # the example's own tenant, whatever the page says
        sub=parsed.sub,
        role=parsed.role,
        agent=parsed.agent,
        on_behalf_of=parsed.on_behalf_of,
        stores=parsed.store or [],
        moderates=parsed.moderates or [],
    )


@pytest.mark.parametrize("example", examples(), ids=lambda e: e.name)
async def test_the_example_runs_and_prints_what_the_page_shows(api: Api, example: Example) -> None:
    tenant = f"t-{uuid.uuid4().hex[:10]}"
    env = dict(os.environ)
    env.update({var: mint(api, tenant, args) for var, args in example.tokens.items()})
    env.update({"MEMWARDEN_URL": api.base_url, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"})
    # Asynchronously: the stack serves from this process's event loop while the example runs.
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", example.python, env=env, cwd=ROOT, stdout=PIPE, stderr=PIPE
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 300)
    assert process.returncode == 0, f"example {example.name} failed:\n{stderr.decode()[-4000:]}"
    assert stdout.decode().splitlines() == example.output.splitlines()
