"""Signed heads of the audit chain, published outside the database, and signed on a timer.

Why: a checkpoint kept only in the database it vouches for can be deleted with the events after it;
whoever can write the database could then drop or rewrite the newest events, recompute the chain
and still verify. So every signed head (a `Checkpoint`: seq, head hash, count, signature) is also
published where a database writer cannot reach:

- an append-only file (`MEMWARDEN_AUDIT_HEADS_FILE`, default `<data_dir>/audit-heads.jsonl`; opened
  O_APPEND and fsynced, one JSON object a line, created 0600);
- the service log (logger `memwarden.audit.heads`, one line a head: ship it off the host);
- in production, optionally an HTTP sink (`MEMWARDEN_AUDIT_HEADS_URL`): each head is POSTed as JSON,
  and a GET on the same URL answers the published heads (a JSON list) for verification.

Verification (`verify_audit_chain(..., published=...)`) then requires the chain to still hold every
published head, and reports how many events are past the last one (not yet anchored).

Only committed checkpoints are published: the publisher reads them back from the store, so a head
signed inside a transaction that later rolled back is never announced. Signing also happens on a
timer (`MEMWARDEN_AUDIT_CHECKPOINT_SECONDS`), not only every `audit_checkpoint_every` events, so the
unanchored tail is at most that old however quiet the service is. The worker runs the timer
(`CheckpointTimer`, started with its stores); several workers publishing the same heads is harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import httpx
import sqlalchemy as sa
from pydantic import ValidationError

from memwarden.audit_signing import Checkpoint
from memwarden.config import Settings
from memwarden.stores.sql import SqlStore
from memwarden.stores.sql_models import audit_checkpoints

_log = logging.getLogger("memwarden.audit.heads")


class HeadSink(Protocol):
    """Somewhere signed heads go, outside the database."""

    name: str

    async def publish(self, head: Checkpoint) -> None: ...


class HeadsFile:
    """An append-only JSON-lines file of published heads (also what verification reads back)."""

    name = "file"

    def __init__(self, path: Path) -> None:
        self.path = path

    def _append(self, line: bytes) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)

    async def publish(self, head: Checkpoint) -> None:
        line = (head.model_dump_json() + "\n").encode()
        await asyncio.to_thread(self._append, line)

    def read(self) -> list[Checkpoint]:
        """Every head in the file; a line that does not parse is skipped (a torn last write)."""
        if not self.path.exists():
            return []
        heads: list[Checkpoint] = []
        for line in self.path.read_text().splitlines():
            try:
                heads.append(Checkpoint.model_validate_json(line))
            except ValidationError:
                continue
        return heads


class HeadsLog:
    """One log line per head, hashes and the signature only."""

    name = "log"

    async def publish(self, head: Checkpoint) -> None:
        _log.info("audit head %s", head.model_dump_json())


class HeadsHttp:
    """POSTs each head to a URL (a transparency log, WORM storage); GET on it answers the heads published."""

    name = "http"

    def __init__(self, url: str, *, timeout: float = 5.0) -> None:
        self.url = url
        self.timeout = timeout

    async def publish(self, head: Checkpoint) -> None:
        async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False) as client:
            response = await client.post(self.url, content=head.model_dump_json(), headers=_JSON)
        if response.status_code >= 300:
            raise HeadPublishError(f"http_{response.status_code}")

    async def read(self) -> list[Checkpoint]:
        async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False) as client:
            response = await client.get(self.url, headers={"Accept": "application/json"})
        if response.status_code != 200:
            raise HeadPublishError(f"http_{response.status_code}")
        try:
            return [Checkpoint.model_validate(item) for item in json.loads(response.content)]
        except (ValueError, TypeError, ValidationError):
            raise HeadPublishError("bad_body") from None


_JSON = {"Content-Type": "application/json"}


class HeadPublishError(Exception):
    """A sink refused or could not be reached (a code, never a body)."""


class AuditHeads:
    """The configured sinks, and what was published through them."""

    def __init__(self, file: HeadsFile, *, http: HeadsHttp | None = None) -> None:
        self.file = file
        self.http = http
        self.sinks: list[HeadSink] = [file, HeadsLog(), *([http] if http is not None else [])]

    @classmethod
    def from_paths(cls, path: Path, url: str | None = None) -> AuditHeads:
        return cls(HeadsFile(path), http=HeadsHttp(url) if url else None)

    def last_published_seq(self) -> int:
        heads = self.file.read()
        return max((h.seq for h in heads), default=0)

    async def publish(self, heads: Sequence[Checkpoint]) -> int:
        """Publish each head through every sink, oldest first; a sink that fails is retried next time."""
        done = 0
        for head in sorted(heads, key=lambda h: h.seq):
            for sink in self.sinks:
                if sink is self.file:
                    continue
                await sink.publish(head)
            await self.file.publish(head)  # last: the file says what every sink has been given
            done += 1
        return done

    async def published(self) -> list[Checkpoint]:
        """Every head published (the file's, and the HTTP sink's when configured), by seq."""
        heads = {h.seq: h for h in self.file.read()}
        if self.http is not None:
            for h in await self.http.read():
                heads.setdefault(h.seq, h)
        return [heads[s] for s in sorted(heads)]


async def committed_checkpoints_after(store: SqlStore, seq: int) -> list[Checkpoint]:
    """Checkpoints the store has committed past `seq`, oldest first."""
    c = audit_checkpoints.c
    async with store.engine.connect() as conn:
        rows = (await conn.execute(sa.select(audit_checkpoints).where(c.seq > seq).order_by(c.seq))).mappings()
        return [Checkpoint.model_validate(dict(row)) for row in rows]


async def sign_and_publish(store: SqlStore, heads: AuditHeads) -> int:
    """One tick: sign the head if it is not signed yet, then publish every committed checkpoint not yet out."""
    await store.checkpoint_audit()
    pending = await committed_checkpoints_after(store, await asyncio.to_thread(heads.last_published_seq))
    return await heads.publish(pending)


def audit_heads(settings: Settings) -> AuditHeads:
    """The sinks the settings name (the file always; the HTTP sink when a URL is set)."""
    return AuditHeads.from_paths(settings.audit_heads_path, settings.audit_heads_url)


class CheckpointTimer:
    """Runs `sign_and_publish` every `interval` seconds until stopped (and once more on stop)."""

    def __init__(self, store: SqlStore, heads: AuditHeads, interval: float) -> None:
        self.store = store
        self.heads = heads
        self.interval = interval
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="audit-checkpoint-timer")

    async def _tick(self) -> None:
        try:
            await sign_and_publish(self.store, self.heads)
        except (HeadPublishError, OSError, sa.exc.SQLAlchemyError) as exc:
            # Nothing is lost: the next tick publishes whatever is still pending.
            _log.warning("audit head publication deferred: %s", type(exc).__name__)

    async def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self.interval)
            await self._tick()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
            self._task = None
