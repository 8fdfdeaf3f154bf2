"""The embedded data dir is private, key files that are not are refused, and forwarded headers are
believed only from trusted proxies (issue 22 part 9).

Over the real embedded stack (Temporal dev server, worker, API under uvicorn) in a fresh data dir:
the dir is 0700 and every database (memwarden.db and its -wal/-shm, the dev server's temporal.db),
key and log file in it 0600. A key file left group-readable stops the service with the file's name
and `chmod 600`. And over real HTTP: `X-Forwarded-Proto: https` from a peer outside
MEMWARDEN_TRUSTED_PROXIES is ignored (the /me cookie stays without Secure), from a trusted one it is
honoured (Secure).
"""

from __future__ import annotations

import asyncio
import stat
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import uvicorn

from api.app import create_app
from memwarden.config import Settings
from memwarden.file_modes import LooseKeyFile
from stack.devserver import free_port
from stack.embedded import run_api
from tests.forget_support import tenant
from tests.stack_support import Stack, embedded_stack


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    async with embedded_stack(tmp_path_factory.mktemp("modes") / "data") as s:
        yield s


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_the_data_dir_is_0700_and_its_databases_and_keys_0600(stack: Stack) -> None:
    alice = stack.auth(tenant(), "alice")
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30) as http:
        written = await http.post(
            "/v1/memories",
            json={"content": "alice likes tea", "type": "fact", "source_kind": "user", "reason": "user_stated_fact"},
            headers=alice,
        )
    assert written.status_code == 200, written.text
    data = stack.settings.data_dir
    assert _mode(data) == 0o700
    expected = {"memwarden.db", "memwarden.db-wal", "temporal.db", "auth.secret", "codec.key", "audit-signing.key"}
    present = {p.name for p in data.iterdir()}
    assert expected <= present, sorted(present)  # the control: they exist, so the modes below mean something
    loose = {p.name: oct(_mode(p)) for p in data.iterdir() if p.is_file() and _mode(p) & 0o077}
    assert loose == {}, loose  # the dev server's log, -shm files and audit heads included


def test_a_key_file_others_may_read_is_refused_with_the_fix(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    key = data / "auth.secret"
    key.write_text("x" * 64)
    key.chmod(0o644)
    with pytest.raises(LooseKeyFile) as refused:
        _ = Settings(data_dir=data).auth_secret_value
    message = str(refused.value)
    assert str(key) in message and f"chmod 600 {key}" in message and "0644" in message
    key.chmod(0o600)
    assert Settings(data_dir=data).auth_secret_value == "x" * 64  # fixed as told: accepted


async def _serve(settings: Settings, stack: Stack) -> tuple[list[uvicorn.Server], asyncio.Task[None]]:
    servers: list[uvicorn.Server] = []
    app = create_app(settings, temporal=stack.client, store=stack.deps.store)
    task = asyncio.create_task(run_api(settings, servers, app))
    deadline = time.monotonic() + 30
    while not (servers and servers[0].started):
        assert not task.done() and time.monotonic() < deadline, "uvicorn did not start"
        await asyncio.sleep(0.05)
    return servers, task


@pytest.mark.parametrize(("trusted", "secure"), [(["10.255.0.1"], False), (["127.0.0.1"], True)])
async def test_forwarded_headers_count_only_from_trusted_proxies(
    stack: Stack, trusted: list[str], secure: bool
) -> None:
    port = free_port()
    settings = stack.settings.model_copy(update={"api_port": port, "trusted_proxies": trusted})
    servers, task = await _serve(settings, stack)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            page = await http.get("/me", headers={"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.7"})
    finally:
        servers[0].should_exit = True
        await asyncio.wait_for(task, 15)
    assert page.status_code == 200
    cookie = page.headers["set-cookie"]
    assert ("Secure" in cookie) is secure, cookie  # the scheme is the proxy's only if the peer is trusted
