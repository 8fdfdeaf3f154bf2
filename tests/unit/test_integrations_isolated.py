"""The core never imports a framework (import-linter checks the rest), and each adapter fails to
import with a message naming its extra when its framework is absent."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memwarden.integrations.langgraph import SLOT_MAX, decode_slot, encode_slot
from memwarden.integrations.outcomes import MemoryInvalid

ROOT = Path(__file__).resolve().parents[2]
CORE = ["memwarden", "api", "worker", "workflows", "activities", "stack"]
FRAMEWORKS = ("langgraph", "langchain_core", "google.adk", "google.genai", "agents")
"""The MCP SDK is left to its own import-linter contract: the API mounts the MCP adapter when installed."""


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_core_imports_no_framework() -> None:
    """What import-linter cannot say (google.adk is a subpackage of an external package), read off the source."""
    offenders: list[str] = []
    for package in CORE:
        for path in (ROOT / package).rglob("*.py"):
            if (ROOT / "memwarden" / "integrations") in path.parents:
                continue
            for name in _imports(path):
                if any(name == f or name.startswith(f + ".") for f in FRAMEWORKS):
                    offenders.append(f"{path.relative_to(ROOT)}: {name}")
    assert offenders == []
    assert _imports(ROOT / "memwarden" / "integrations" / "langgraph.py") >= {"langgraph.store.base"}  # the scan sees


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("memwarden.integrations.langgraph", "langgraph", "memwarden[langgraph]"),
        ("memwarden.integrations.adk", "google.adk", "memwarden[adk]"),
    ],
)
def test_an_adapter_without_its_framework_names_the_extra(module: str, blocked: str, extra: str) -> None:
    result = _run(
        f"import sys; sys.modules[{blocked!r}] = None\n"
        f"try:\n    import {module}\nexcept ImportError as e:\n    print('IMPORTERROR', e)\n"
    )
    assert result.returncode == 0, result.stderr
    assert "IMPORTERROR" in result.stdout and f"pip install '{extra}'" in result.stdout


def test_the_package_and_its_shared_modules_import_no_framework() -> None:
    result = _run(
        "import sys\n"
        "import memwarden.integrations, memwarden.integrations.outcomes, memwarden.integrations.service\n"
        "print(sorted(m for m in sys.modules\n"
        "    if m.split('.')[0] in ('langgraph', 'langchain_core', 'mcp', 'agents') or m.startswith('google.adk')))\n"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


labels = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8).filter(lambda s: "." not in s)


@given(path=st.lists(labels, max_size=3), key=st.text(st.characters(blacklist_categories=("Cs",)), max_size=10))
def test_a_slot_names_its_path_and_key_and_only_them(path: list[str], key: str) -> None:
    try:
        slot = encode_slot(path, key)
    except MemoryInvalid as error:
        assert error.code == "slot_too_long" and error.fields == ["key"]
        return
    assert len(slot) <= SLOT_MAX
    assert all(c.isascii() and (c.isalnum() or c in "_.:-") for c in slot)  # memwarden's slot alphabet
    assert decode_slot(slot) == (tuple(path), key)


def test_slots_written_another_way_are_not_items() -> None:
    assert decode_slot(None) is None
    assert decode_slot("user.city") is None
    assert decode_slot("lg.prefs.colour") == (("prefs",), "colour")
