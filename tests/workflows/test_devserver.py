"""The embedded Temporal dev server: starts, runs a workflow, keeps its history across restarts."""

from __future__ import annotations

import base64
import os
import socket
import sqlite3
import time
import uuid
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.client import WorkflowExecutionStatus
from temporalio.worker import Worker

from memwarden.config import Settings
from memwarden.temporal.client import connect
from memwarden.temporal.codec import ENCODING
from stack.devserver import DevServer, DevServerError, find_temporal, free_port

SECRET = "my locker code is 5813"


@workflow.defn(sandboxed=False)
class Shout:
    @workflow.run
    async def run(self, text: str) -> str:
        return text.upper()


def _settings(server: DevServer, key: str) -> Settings:
    return Settings(temporal_address=server.address, temporal_namespace="default", codec_key=key)


async def test_run_workflow_and_keep_history_across_restart(tmp_path: Path) -> None:
    key = base64.b64encode(os.urandom(32)).decode()
    workflow_id = f"shout-{uuid.uuid4().hex}"
    task_queue = f"tq-{uuid.uuid4().hex}"

    first = DevServer(tmp_path, port=free_port(), headless=True)
    async with first:
        assert first.running
        client = await connect(_settings(first, key))
        async with Worker(client, task_queue=task_queue, workflows=[Shout]):
            result = await client.execute_workflow(Shout.run, SECRET, id=workflow_id, task_queue=task_queue)
        assert result == SECRET.upper()
        history = await client.get_workflow_handle(workflow_id).fetch_history()
        started = history.events[0].workflow_execution_started_event_attributes
        (payload,) = started.input.payloads
        assert payload.metadata["encoding"] == ENCODING
        assert SECRET.encode() not in history.to_json().encode()
    assert not first.running
    assert first.db_path.exists()
    # The server keeps its file in write-ahead-log mode (SQLITE_PRAGMAS): a mode the file itself records.
    with sqlite3.connect(first.db_path) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)

    second = DevServer(tmp_path, port=free_port(), headless=True)
    async with second:
        client = await connect(_settings(second, key))
        listed = [wf.id async for wf in client.list_workflows(f'WorkflowId = "{workflow_id}"')]
        assert listed == [workflow_id]
        handle = client.get_workflow_handle(workflow_id)
        assert (await handle.describe()).status is WorkflowExecutionStatus.COMPLETED
        assert await handle.result() == SECRET.upper()
    assert not second.running


async def test_early_exit_is_reported_with_log_tail(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        server = DevServer(tmp_path, port=busy.getsockname()[1], headless=True, startup_timeout=20)
        began = time.monotonic()
        with pytest.raises(DevServerError, match="exited with code") as info:
            await server.start()
    assert time.monotonic() - began < 10
    assert "address already in use" in str(info.value)
    assert not server.running
    await server.stop()  # idempotent after a failed start


def test_command_line_and_helpers(tmp_path: Path) -> None:
    assert os.access(find_temporal(), os.X_OK)
    port = free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))  # it really was free
    with_ui = DevServer(tmp_path, port=7300, ui_port=7301).command()
    assert with_ui[1:3] == ["server", "start-dev"]
    assert with_ui[with_ui.index("--ui-port") + 1] == "7301"
    assert with_ui[with_ui.index("--db-filename") + 1] == str(tmp_path / "temporal.db")
    assert "--headless" not in with_ui
    pragmas = [with_ui[i + 1] for i, arg in enumerate(with_ui) if arg == "--sqlite-pragma"]
    assert pragmas == ["journal_mode=wal", "synchronous=FULL"]
    headless = DevServer(tmp_path, port=7300, headless=True).command()
    assert "--headless" in headless and "--ui-port" not in headless
