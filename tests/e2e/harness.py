"""Run `memwarden up` as a real subprocess, the way a person runs it, and watch its process tree.

Why a subprocess: Ctrl-C handling, the Temporal child's lifetime and the exit code are properties
of the command, not of any function; only a separate process shows them.
"""

from __future__ import annotations

import base64
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from stack.devserver import free_port

READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0


def memwarden_exe() -> str:
    """The venv's `memwarden` script (next to this interpreter), else the one on PATH."""
    here = Path(sys.executable).parent / "memwarden"
    if here.exists():
        return str(here)
    found = shutil.which("memwarden")
    if not found:
        raise RuntimeError("the memwarden script is not installed (pip install -e .)")
    return found


def venv_bin() -> Path:
    return Path(memwarden_exe()).parent


def child_env(**extra: str) -> dict[str, str]:
    """The test's environment without MEMWARDEN_* settings that would redirect the child."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMWARDEN_")}
    env["HF_HUB_OFFLINE"] = "1"
    env.update(extra)
    return env


def production_secrets() -> dict[str, str]:
    """Fresh values of every secret the production profile requires (it has no data dir to keep them in),
    for the processes an e2e test or a bench starts."""
    return {
        "MEMWARDEN_AUTH_SECRET": secrets.token_urlsafe(48),
        "MEMWARDEN_CODEC_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
        "MEMWARDEN_AUDIT_SIGNING_KEY": base64.b64encode(secrets.token_bytes(32)).decode(),
    }


def mint(data_dir: Path | None, *args: str, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    """`memwarden token ...` as a subprocess: the secret the server reads (its file, or MEMWARDEN_AUTH_SECRET)."""
    cmd = [memwarden_exe(), "token", *args]
    if data_dir is not None:
        cmd += ["--data-dir", str(data_dir)]
    done = subprocess.run(
        cmd, capture_output=True, text=True, timeout=60, cwd=cwd, env=child_env(**(env or {})), check=False
    )
    assert done.returncode == 0, f"memwarden token failed ({done.returncode}): {done.stderr}"
    token = done.stdout.strip()
    assert token.count(".") == 2, "expected one JWT on stdout"
    return token


def temporal_pids(db_path: Path) -> list[int]:
    """Live `temporal server start-dev` processes using this database file (any parent)."""
    needle = str(db_path.resolve())
    pids: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        argv = raw.decode(errors="replace").split("\0")
        if state == "Z" or "start-dev" not in argv or "--db-filename" not in argv:
            continue
        at = argv.index("--db-filename") + 1
        db = argv[at] if at < len(argv) else ""
        try:  # `up` without --data-dir passes a path relative to its working directory
            resolved = str((Path(os.readlink(entry / "cwd")) / db).resolve())
        except OSError:
            continue
        if resolved == needle:
            pids.append(int(entry.name))
    return pids


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


@dataclass
class Stack:
    """One `memwarden up` child: its ports, data dir, output files and exit status."""

    data_dir: Path
    cwd: Path
    api_port: int = field(default_factory=free_port)
    temporal_port: int = field(default_factory=free_port)
    pass_data_dir: bool = True
    proc: subprocess.Popen[bytes] | None = None
    started_s: float = 0.0
    ready_after_s: float = 0.0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}"

    @property
    def out_path(self) -> Path:
        return self.cwd / f"up-{self.api_port}.out"

    @property
    def err_path(self) -> Path:
        return self.cwd / f"up-{self.api_port}.err"

    def command(self) -> list[str]:
        cmd = [memwarden_exe(), "up", "--port", str(self.api_port), "--temporal-port", str(self.temporal_port)]
        if self.pass_data_dir:
            cmd += ["--data-dir", str(self.data_dir)]
        return [*cmd, "--headless"]

    def start(self) -> None:
        """Launch in its own session, as a terminal would: SIGINT to the group is Ctrl-C."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        with open(self.out_path, "ab") as out, open(self.err_path, "ab") as err:
            self.proc = subprocess.Popen(
                self.command(),
                cwd=self.cwd,
                env=child_env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
        self.started_s = time.monotonic()

    def output(self) -> str:
        out = self.out_path.read_text(errors="replace") if self.out_path.exists() else ""
        err = self.err_path.read_text(errors="replace") if self.err_path.exists() else ""
        return f"--- stdout\n{out}\n--- stderr\n{err[-6000:]}"

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> dict[str, object]:
        """Poll /readyz until 200; fail at once (with the output) if the process exits first."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        last = "no answer"
        with httpx.Client(timeout=10.0) as http:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise AssertionError(f"memwarden up exited with {self.proc.returncode}\n{self.output()}")
                try:
                    answer = http.get(f"{self.base_url}/readyz")
                    if answer.status_code == 200:
                        self.ready_after_s = time.monotonic() - self.started_s
                        return answer.json()  # type: ignore[no-any-return]
                    last = f"{answer.status_code} {answer.text[:300]}"
                except httpx.HTTPError as exc:
                    last = type(exc).__name__
                time.sleep(0.25)
        raise AssertionError(f"not ready after {timeout:.0f}s (last: {last})\n{self.output()}")

    def interrupt(self, timeout: float = STOP_TIMEOUT_S) -> tuple[int, float]:
        """Ctrl-C: SIGINT to the process group; returns (exit code, seconds to exit)."""
        assert self.proc is not None
        began = time.monotonic()
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"memwarden up did not exit {timeout:.0f}s after SIGINT\n{self.output()}") from None
        return code, time.monotonic() - began

    def kill(self) -> None:
        """Last-resort clean-up for a failed test: this child, then any Temporal server on our db."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)
        for pid in temporal_pids(self.data_dir / "temporal.db"):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def wait_http_ok(url: str, proc: subprocess.Popen[bytes], output: Callable[[], str], timeout: float) -> dict[str, Any]:
    """Poll `url` until 200 and return its JSON; fail at once (with `output()`) if `proc` exits first."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    with httpx.Client(timeout=10.0) as http:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise AssertionError(f"{proc.args!r} exited with {proc.returncode}\n{output()}")
            try:
                answer = http.get(url)
                if answer.status_code == 200:
                    return answer.json()  # type: ignore[no-any-return]
                last = f"{answer.status_code} {answer.text[:300]}"
            except httpx.HTTPError as exc:
                last = type(exc).__name__
            time.sleep(0.25)
    raise AssertionError(f"{url} not ready after {timeout:.0f}s (last: {last})\n{output()}")


@dataclass
class Child:
    """One production process (`memwarden worker` or `memwarden api`), configured only by its environment."""

    name: str
    args: list[str]
    env: dict[str, str]
    cwd: Path
    proc: subprocess.Popen[bytes] | None = None

    @property
    def out_path(self) -> Path:
        return self.cwd / f"{self.name}.out"

    @property
    def err_path(self) -> Path:
        return self.cwd / f"{self.name}.err"

    def start(self) -> None:
        with open(self.out_path, "ab") as out, open(self.err_path, "ab") as err:
            self.proc = subprocess.Popen(
                [memwarden_exe(), *self.args],
                cwd=self.cwd,
                env=child_env(**self.env),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )

    def output(self) -> str:
        out = self.out_path.read_text(errors="replace") if self.out_path.exists() else ""
        err = self.err_path.read_text(errors="replace") if self.err_path.exists() else ""
        return f"--- {self.name} stdout\n{out[-3000:]}\n--- {self.name} stderr\n{err[-6000:]}"

    def wait_ready(self, url: str, timeout: float = READY_TIMEOUT_S) -> dict[str, Any]:
        assert self.proc is not None
        return wait_http_ok(url, self.proc, self.output, timeout)

    def open_files(self) -> list[str]:
        """Paths this process holds open right now (from /proc/<pid>/fd)."""
        assert self.proc is not None
        found: list[str] = []
        for fd in Path(f"/proc/{self.proc.pid}/fd").iterdir():
            try:
                found.append(os.readlink(fd))
            except OSError:
                continue
        return found

    def terminate(self, timeout: float = STOP_TIMEOUT_S) -> int:
        """SIGTERM, as an orchestrator stops a pod; returns the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{self.name} did not exit {timeout:.0f}s after SIGTERM\n{self.output()}") from None

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)
