"""`memwarden import FILE`: upload an NDJSON file to the API's bulk import and watch it to the end.

The file goes over HTTP in chunks within the API's request body limit; the API admits and parks each
line (the content never enters workflow history) and ImportWorkflow decides them in batches. The
import is named by the caller and the file's hash, so running the command again resumes an
interrupted upload, or reports a finished import without applying anything twice. On a terminal a
progress bar shows done, rejected, rate and eta; otherwise a plain line every few seconds.
"""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path
from typing import Any, TextIO

import httpx

POLL_S = 0.5
PLAIN_EVERY_S = 5.0
BAR_WIDTH = 30
ERRORS_SHOWN = 50


class ImportFailed(Exception):
    """The API refused the import as a whole (a problem+json code), or it did not finish in time."""


def file_lines(data: bytes) -> list[bytes]:
    """The file's lines as numbered from 1 (a final newline ends the last line; CRLF tolerated)."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line.removesuffix(b"\r") for line in lines]


def chunks(lines: list[bytes], first: int, max_bytes: int, line_max: int) -> list[tuple[int, bytes]]:
    """(first line number, NDJSON body) pieces, each within `max_bytes`.

    A line over the API's line limit is sent cut to one byte past it: the API reports it
    `line_too_large` on its number without reading it, and every other line still fits a chunk.
    """
    out: list[tuple[int, bytes]] = []
    body: list[bytes] = []
    size, start = 0, first
    budget = max_bytes - 1024
    for offset, line in enumerate(lines[first - 1 :]):
        piece = (line[: line_max + 1] if len(line) > line_max else line) + b"\n"
        if body and size + len(piece) > budget:
            out.append((start, b"".join(body)))
            body, size, start = [], 0, first + offset
        body.append(piece)
        size += len(piece)
    if body:
        out.append((start, b"".join(body)))
    return out


def _check(answer: httpx.Response) -> dict[str, Any]:
    if answer.status_code >= 400:
        try:
            code = answer.json().get("code", "error")
        except ValueError:
            code = "error"
        raise ImportFailed(f"{answer.status_code} {code}")
    return answer.json()  # type: ignore[no-any-return]


class Progress:
    """Draws the import's progress: a bar redrawn in place on a TTY, a plain line now and then otherwise."""

    def __init__(self, out: TextIO, total: int) -> None:
        self.out = out
        self.total = total
        self.tty = out.isatty()
        self.started = time.monotonic()
        self.first_done: int | None = None
        self.last_plain = 0.0

    def line(self, state: dict[str, Any]) -> str:
        done = int(state["done_lines"])
        counts = state["counts"]
        rejected = int(counts.get("REJECT", 0)) + int(counts.get("ERROR", 0))
        if self.first_done is None:
            self.first_done = done
        elapsed = max(time.monotonic() - self.started, 1e-6)
        rate = (done - self.first_done) / elapsed
        left = self.total - done
        eta = f"{left / rate:.0f}s" if rate > 0 and left > 0 else ("0s" if left <= 0 else "?")
        filled = int(BAR_WIDTH * done / self.total) if self.total else BAR_WIDTH
        bar = "#" * filled + "." * (BAR_WIDTH - filled)
        return f"[{bar}] {done}/{self.total} done, {rejected} rejected, {rate:.0f} lines/s, eta {eta}"

    def show(self, state: dict[str, Any], *, final: bool = False) -> None:
        text = self.line(state)
        if self.tty:
            self.out.write("\r\x1b[2K" + text + ("\n" if final else ""))
            self.out.flush()
        elif final or time.monotonic() - self.last_plain >= PLAIN_EVERY_S:
            self.last_plain = time.monotonic()
            print(text, file=self.out, flush=True)


def run_import(path: Path, url: str, token: str, *, out: TextIO = sys.stdout, timeout_s: float = 24 * 3600) -> int:
    """Upload, start and follow one import; returns the process exit code (0 once every line is decided)."""
    data = path.read_bytes()
    lines = file_lines(data)
    if not lines:
        print("memwarden import: the file has no lines", file=sys.stderr)
        return 2
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as http:
        try:
            return _follow(http, lines, hashlib.sha256(data).hexdigest(), out, timeout_s)
        except ImportFailed as exc:
            print(f"memwarden import: {exc}", file=sys.stderr)
            return 1


def _follow(http: httpx.Client, lines: list[bytes], digest: str, out: TextIO, timeout_s: float) -> int:
    state = _check(http.post("/v1/imports", json={"sha256": digest, "total_lines": len(lines)}))
    import_id = state["import_id"]
    print(f"import {import_id}: {len(lines)} lines", file=out, flush=True)
    if state["status"] == "uploading":
        # From line 1 each time: lines that already arrived are left as they are, so a resumed upload is safe.
        for start, body in chunks(lines, 1, int(state["request_max_bytes"]), int(state["line_max_bytes"])):
            _check(
                http.put(
                    f"/v1/imports/{import_id}/lines",
                    params={"first_line": start},
                    content=body,
                    headers={"Content-Type": "application/x-ndjson"},
                )
            )
        state = _check(http.post(f"/v1/imports/{import_id}/start"))
    progress = Progress(out, len(lines))
    deadline = time.monotonic() + timeout_s
    while state["status"] != "done":
        progress.show(state)
        if time.monotonic() > deadline:
            raise ImportFailed("the import did not finish in time (it goes on; run the command again to follow it)")
        time.sleep(POLL_S)
        state = _check(http.get(f"/v1/imports/{import_id}", params={"limit": 1}))
    state = _check(http.get(f"/v1/imports/{import_id}", params={"limit": ERRORS_SHOWN}))
    progress.show(state, final=True)
    counts = ", ".join(f"{k} {v}" for k, v in state["counts"].items() if v)
    print(f"decided {state['done_lines']} of {state['total_lines']} lines: {counts}", file=out)
    for error in state["errors"]:
        field = f" ({error['field']})" if error.get("field") else ""
        print(f"line {error['line']}: {error['decision']} {error['reason']}{field}", file=out)
    if state["next_errors_after"] is not None:
        print(f"... more: GET /v1/imports/{import_id}?errors_after={state['next_errors_after']}", file=out)
    return 0
