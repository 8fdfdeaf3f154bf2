"""The MCP adapter is an extra: the core runs without it, `/mcp` appears only with it, and asking for it without
it fails naming the extra.

Each case runs in a fresh interpreter, so `sys.modules` shows exactly what importing the service pulled in;
"without the extra" is an interpreter in which `import mcp` fails (`sys.modules["mcp"] = None`, Python's own
way to make a module unimportable).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
WITHOUT_MCP = 'import sys\nsys.modules["mcp"] = None\n'


def run(code: str, tmp_path: Path, *, prelude: str = "") -> dict[str, object]:
    script = prelude + textwrap.dedent(code)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWARDEN_")}
    env |= {"PYTHONPATH": str(REPO_ROOT), "MEMWARDEN_DATA_DIR": str(tmp_path), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


SERVICE = """
import json, sys
from api.app import create_app
from memwarden.config import Settings
import activities.remember, activities.memory, activities.forget, worker.runtime, worker.main, stack.cli, stack.embedded

def paths(**settings):
    return [getattr(r, "path", None) for r in create_app(Settings(**settings)).router.routes]

def loaded():
    sdk = ("mcp.", "agents")
    return sorted(m for m, v in sys.modules.items() if v is not None and (m == "mcp" or m.startswith(sdk)))
"""


def test_without_the_extra_the_service_runs_and_serves_no_mcp(tmp_path: Path) -> None:
    found = run(
        SERVICE
        + """
out = {"default": "/mcp" in paths(), "off": "/mcp" in paths(mcp_enabled=False), "loaded": loaded()}
try:
    create_app(Settings(mcp_enabled=True))
    out["on"] = "started"
except RuntimeError as exc:
    out["on"] = str(exc)
print(json.dumps(out))
""",
        tmp_path,
        prelude=WITHOUT_MCP,
    )
    assert found["default"] is False and found["off"] is False and found["loaded"] == []
    assert "pip install 'memwarden[mcp]'" in str(found["on"]) and "MEMWARDEN_MCP_ENABLED" in str(found["on"])


def test_with_the_extra_off_nothing_imports_the_sdk_and_on_by_default_mcp_is_mounted(tmp_path: Path) -> None:
    found = run(
        SERVICE
        + """
off = "/mcp" in paths(mcp_enabled=False)
out = {"off": off, "loaded_when_off": loaded()}
routes = paths()
out["default"] = "/mcp" in routes and "/.well-known/oauth-protected-resource/mcp" in routes
out["loaded_when_on"] = "mcp" in loaded()
print(json.dumps(out))
""",
        tmp_path,
    )
    assert found == {"off": False, "loaded_when_off": [], "default": True, "loaded_when_on": True}


def test_memwarden_mcp_without_the_extra_names_it(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWARDEN_")}
    env |= {"PYTHONPATH": str(REPO_ROOT), "MEMWARDEN_TOKEN": "x"}
    code = WITHOUT_MCP + "from stack.cli import main\nraise SystemExit(main(['mcp']))\n"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    assert done.returncode == 2 and "pip install 'memwarden[mcp]'" in done.stderr


def test_the_metadata_urls_follow_the_settings() -> None:
    from memwarden.config import Settings

    assert Settings(api_host="0.0.0.0", api_port=9000).mcp_resource == "http://127.0.0.1:9000/mcp"
    public = Settings(mcp_resource_url="https://memory.example.com/mcp/")
    assert public.mcp_resource == "https://memory.example.com/mcp"
    assert public.mcp_authorization_server_url == "https://memory.example.com"
    idp = Settings(mcp_resource_url="https://memory.example.com/mcp", auth_jwks_issuer="https://idp.example.com")
    assert idp.mcp_authorization_server_url == "https://idp.example.com"
    named = Settings(mcp_authorization_server="https://login.example.com", auth_jwks_issuer="https://idp.example.com")
    assert named.mcp_authorization_server_url == "https://login.example.com"
