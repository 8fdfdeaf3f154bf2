"""`memwarden up` as a person runs it: a real process tree, real HTTP, Ctrl-C, and a second start.

One stack is started for the module (the first two tests share it); the README test and the
busy-port test start their own, because what they check is how `up` starts.
"""

from __future__ import annotations

import ast
import asyncio
import json
import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memwarden.client import MemwardenClient
from tests.e2e.harness import Stack, child_env, memwarden_exe, mint, port_is_free, temporal_pids, venv_bin

pytestmark = pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="process checks read /proc")

README = Path(__file__).resolve().parents[2] / "README.md"
TENANT = "acme"
CONTENT = "Alice prefers aisle seats on short flights"
SECOND = "Alice's home airport is Lisbon"

# What the first test wrote, for the restart test to look for (set by whichever test runs first).
WRITTEN: dict[str, str] = {}


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("stack-up")


@pytest.fixture(scope="module")
def stack(workdir: Path) -> Iterator[Stack]:
    s = Stack(data_dir=workdir / "data", cwd=workdir)
    s.start()
    try:
        s.wait_ready()
        yield s
    finally:
        s.kill()


def _agent_token(data_dir: Path | None, cwd: Path | None = None) -> str:
    return mint(
        data_dir,
        *("--tenant", TENANT, "--sub", "planner-svc", "--role", "agent", "--agent", "planner"),
        *("--on-behalf-of", "alice"),
        cwd=cwd,
    )


def _user_token(data_dir: Path | None, sub: str = "alice", cwd: Path | None = None) -> str:
    return mint(data_dir, "--tenant", TENANT, "--sub", sub, "--role", "user", cwd=cwd)


def _remember(stack: Stack, token: str, content: str, **extra: Any) -> dict[str, Any]:
    body = {"content": content, "type": "preference", "source_kind": "user", "reason": "user_explicit_preference"}
    answer = httpx.post(
        f"{stack.base_url}/v1/memories", json=body | extra, headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


async def test_remember_search_list_get_over_real_http(stack: Stack) -> None:
    agent = _agent_token(stack.data_dir)
    user = _user_token(stack.data_dir)

    # Raw HTTP for the write, the way any agent backend in any language would do it.
    began = time.monotonic()
    written = _remember(stack, agent, CONTENT, slot="travel.seat")
    write_ms = (time.monotonic() - began) * 1000
    assert written["decision"] == "ADD", written
    assert written["reason"] == "accepted"
    assert written["workflow_id"] == f"remember-{written['memory_id']}"
    assert CONTENT not in json.dumps(written)
    memory_id = written["memory_id"]
    WRITTEN["memory_id"] = memory_id

    # The Python client for the rest.
    async with MemwardenClient(stack.base_url, agent) as mw:
        other = await mw.remember(SECOND, type="fact", source_kind="user", reason="user_stated_fact")
        assert other.decision.value == "ADD"
        assert other.memory_id and other.memory_id != memory_id
        found = await mw.search("which seat does alice like on a plane?", k=3)
        assert found.workflow_id.startswith("retrieve-")
        ids = [hit.memory_id for hit in found.results]
        assert memory_id in ids, ids
        hit = found.results[ids.index(memory_id)]
        assert hit.content == CONTENT
        assert hit.slot == "travel.seat"
        assert hit.label.startswith("[MEMORY type=preference")
        assert CONTENT in found.context
        assert found.withheld == []

    async with MemwardenClient(stack.base_url, user) as mine:
        page = await mine.list_memories()
        listed = {item["id"]: item for item in page.items}
        assert {memory_id, other.memory_id} <= set(listed)
        assert listed[memory_id]["owner_id"] == "alice"
        assert listed[memory_id]["status"] == "active"
        one = await mine.get_memory(memory_id)
        assert one["id"] == memory_id
        assert one["content"] == CONTENT
        assert one["history"] == []

    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
        # Raw GET as well: the JSON an HTTP caller gets, not the client's model.
        raw = await http.get(f"/v1/memories/{memory_id}", headers={"Authorization": f"Bearer {user}"})
        assert raw.status_code == 200
        assert raw.headers["content-type"].startswith("application/json")
        assert raw.json()["content"] == CONTENT

        # Another person of the same tenant sees none of it.
        bob = {"Authorization": f"Bearer {_user_token(stack.data_dir, sub='bob')}"}
        hidden = await http.get(f"/v1/memories/{memory_id}", headers=bob)
        assert hidden.status_code == 404
        assert hidden.headers["content-type"] == "application/problem+json"
        assert (await http.get("/v1/memories", headers=bob)).json()["items"] == []
    print(f"\nup ready after {stack.ready_after_s:.1f}s; first remember over HTTP {write_ms:.0f} ms")


def _assert_stopped_cleanly(stack: Stack, code: int, took: float, temporal_pid: int) -> None:
    assert code == 0, f"exit code {code}\n{stack.output()}"
    assert took < 20, f"took {took:.1f}s to stop"
    with pytest.raises(ProcessLookupError):
        os.kill(temporal_pid, 0)
    assert temporal_pids(stack.data_dir / "temporal.db") == [], "a Temporal dev server outlived `up`"
    assert port_is_free(stack.api_port), "the API port is still bound"
    assert port_is_free(stack.temporal_port), "the Temporal port is still bound"
    out = stack.out_path.read_text()
    assert out.rstrip().endswith("memwarden up: stopped")
    assert "Traceback" not in stack.err_path.read_text(), stack.output()


async def test_ctrl_c_stops_all_three_and_second_up_keeps_data(stack: Stack) -> None:
    agent = _agent_token(stack.data_dir)
    user = _user_token(stack.data_dir)
    memory_id = WRITTEN.get("memory_id") or _remember(stack, agent, CONTENT, slot="travel.seat")["memory_id"]

    pids = temporal_pids(stack.data_dir / "temporal.db")
    assert len(pids) == 1, f"expected one Temporal dev server on the data dir, found {pids}"
    code, took = stack.interrupt()
    _assert_stopped_cleanly(stack, code, took, pids[0])
    print(f"\nfirst stop: exit {code} after {took:.2f}s")

    # The same command again, same data dir and ports: everything is still there.
    stack.start()
    stack.wait_ready()
    auth = {"Authorization": f"Bearer {user}"}  # minted before the restart: the secret persisted
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
        again = await http.get(f"/v1/memories/{memory_id}", headers=auth)
        assert again.status_code == 200, again.text
        assert again.json()["content"] == CONTENT
        assert memory_id in [m["id"] for m in (await http.get("/v1/memories", headers=auth)).json()["items"]]
    async with MemwardenClient(stack.base_url, agent) as mw:
        found = await mw.search("aisle seat on short flights", k=3)
    assert memory_id in [h.memory_id for h in found.results], "the index lost the memory across a restart"
    # ...and Temporal kept its history: the first run's workflow is still described.
    wf = f"remember-{memory_id}"
    describe = [str(venv_bin() / "temporal"), "workflow", "describe", "--address", f"127.0.0.1:{stack.temporal_port}"]
    described = await asyncio.to_thread(
        subprocess.run,
        [*describe, "--workflow-id", wf, "--output", "json"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert described.returncode == 0, described.stderr
    assert "COMPLETED" in described.stdout
    assert CONTENT not in described.stdout, "workflow history shows memory content"

    pids = temporal_pids(stack.data_dir / "temporal.db")
    assert len(pids) == 1
    code, took = stack.interrupt()
    _assert_stopped_cleanly(stack, code, took, pids[0])
    print(f"second up ready after {stack.ready_after_s:.1f}s; stop: exit {code} after {took:.2f}s")


@pytest.mark.parametrize("part", ["api", "temporal"])
def test_up_with_a_busy_port_fails_cleanly_and_leaves_nothing_running(tmp_path: Path, part: str) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        s = Stack(data_dir=tmp_path / "data", cwd=tmp_path)
        if part == "api":
            s.api_port = port
        else:
            s.temporal_port = port
        s.start()
        assert s.proc is not None
        try:
            code = s.proc.wait(timeout=120)
        finally:
            s.kill()
    err = s.err_path.read_text()
    assert code == 1, s.output()
    assert "address already in use" in err
    assert "memwarden up: " in err, "no one-line reason from `up`"
    assert "Traceback" not in err, s.output()
    assert temporal_pids(s.data_dir / "temporal.db") == [], "a Temporal dev server outlived a failed `up`"
    assert port_is_free(s.temporal_port if part == "api" else s.api_port)


# -- README quick start, run as written ------------------------------------------------------


def _fenced(section: str, lang: str) -> str:
    """The first ```lang block of the README section titled `section`."""
    text = README.read_text()
    start = text.index(f"## {section}\n")
    end = text.find("\n## ", start + 1)
    body = text[start : end if end != -1 else len(text)]
    match = re.search(rf"```{lang}\n(.*?)```", body, re.S)
    assert match, f"no ```{lang} block in README section {section!r}"
    return match.group(1)


def _json_docs(stdout: str) -> list[Any]:
    """`curl -s` prints JSON bodies back to back; split them."""
    decoder = json.JSONDecoder()
    docs, i = [], 0
    while i < len(stdout):
        if stdout[i].isspace():
            i += 1
            continue
        doc, i = decoder.raw_decode(stdout, i)
        docs.append(doc)
    return docs


@pytest.mark.skipif(shutil.which("curl") is None, reason="the quick start uses curl")
async def test_readme_quick_start_as_written(tmp_path: Path) -> None:
    block = _fenced("Quick start", "sh")
    assert block.count("http://127.0.0.1:8080") == 5
    assert ".venv/bin/memwarden token" in block

    # A checkout-like directory: `.venv` here, the default data dir (./.memwarden) here too.
    (tmp_path / ".venv").symlink_to(venv_bin().parent)
    s = Stack(data_dir=tmp_path / ".memwarden", cwd=tmp_path, pass_data_dir=False)
    # `make up ARGS="--port P --temporal-port T --headless"`: other stacks may hold 8080/7233/8233.
    assert Path(memwarden_exe()).parent == venv_bin()
    s.start()
    try:
        s.wait_ready()
        assert s.data_dir.is_dir(), "`up` without --data-dir did not use ./.memwarden"
        script = block.replace("http://127.0.0.1:8080", s.base_url)
        done = await asyncio.to_thread(
            subprocess.run,
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=tmp_path,
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        remembered, conversed, searched, listed, ready = _json_docs(done.stdout)

        # The README's sample answer has the same shape and fixed values as the real one.
        sample_line = next(line for line in block.splitlines() if line.startswith("# -> "))
        sample = json.loads(sample_line.removeprefix("# -> "))
        assert set(remembered) == set(sample)
        assert remembered["decision"] == sample["decision"] == "ADD"
        assert remembered["reason"] == sample["reason"]
        assert remembered["supersedes"] is sample["supersedes"] is None
        assert remembered["workflow_id"] == f"remember-{remembered['memory_id']}"

        memory_id = remembered["memory_id"]
        assert [r["memory_id"] for r in searched["results"]][:1] == [memory_id], searched
        assert "window seats" in searched["context"]
        # The conversation's candidates as the README's sample shows them, each decided by the gate
        got = [(c["message_index"], c["kind"], c["decision"]) for c in conversed["candidates"]]
        assert got[:2] == [(0, "fact", "ADD"), (1, "correction", "UPDATE")], got
        assert [c["kind"] for c in conversed["candidates"][2:]] == ["task_guidance"], got
        live = {c["memory_id"] for c in conversed["candidates"] if c["decision"] in ("ADD", "UPDATE")}
        live -= {conversed["candidates"][1]["supersedes"]}  # Mumbai, superseded by Pune
        assert {m["id"] for m in listed["items"]} == {memory_id} | live
        assert {m["owner_id"] for m in listed["items"]} == {"alice"}
        assert ready["status"] == "ready"
        assert all(ready["checks"].values())

        # The Python snippet, with the agent token the shell block minted (same command).
        agent_token = _agent_token(None, cwd=tmp_path)
        snippet = _fenced("Quick start", "python").replace("http://127.0.0.1:8080", s.base_url)
        code = compile(snippet, "README.md", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        scope: dict[str, Any] = {"agent_token": agent_token}
        result = eval(code, scope)
        if result is not None:
            await result
        assert scope["answer"].decision.value in ("ADD", "NOOP")
        assert scope["hits"].results, "the README's Python search found nothing"

        # The client section's example, called as a backend would: a conversation turn with its provenance.
        example = _fenced("The Python client", "python").replace("http://127.0.0.1:8080", s.base_url)
        client_scope: dict[str, Any] = {}
        exec(compile(example, "README.md", "exec"), client_scope)
        turn = "Alice said the harbour walk starts at the old lighthouse"
        await client_scope["remember_turn"](agent_token, turn, "D1", "D1:4", "Alice")
        async with MemwardenClient(s.base_url, agent_token) as mw:
            found = await mw.search("where does the harbour walk start?", k=3)
        assert [h.content for h in found.results][:1] == [turn], found

        # The README's other claims: docs at /docs, and 413 naming `content` past 4,096 characters.
        async with httpx.AsyncClient(base_url=s.base_url) as http:
            assert (await http.get("/docs")).status_code == 200
            assert (await http.get("/openapi.json")).json()["info"]["title"] == "memwarden"
            too_long = await http.post(
                "/v1/memories",
                headers={"Authorization": f"Bearer {agent_token}"},
                json={
                    "content": "x" * 4097,
                    "type": "preference",
                    "source_kind": "user",
                    "reason": "user_explicit_preference",
                },
            )
        assert too_long.status_code == 413
        assert too_long.headers["content-type"] == "application/problem+json"
        assert [e["field"] for e in too_long.json()["errors"]] == ["content"]

        pids = temporal_pids(s.data_dir / "temporal.db")
        assert len(pids) == 1, "no Temporal dev server found on ./.memwarden"
        code_, took = s.interrupt()
        _assert_stopped_cleanly(s, code_, took, pids[0])
        print(f"\nREADME stack ready after {s.ready_after_s:.1f}s; stop {took:.2f}s")
    finally:
        s.kill()
