"""Summaries: an owner's episodic memories consolidated into one `summary` memory with lineage.

A summary is a memory like any other (durable store, index), plus `derived_from`: the ids it was
built from. That lineage is what Forget follows: every summary (any version) whose `derived_from`
includes a forgotten id is re-derived from what remains and the old versions are purged.

The default summarizer is extractive (no model, no network): the first sentence of each source,
newest first, within the content limit. An LLM summarizer plugs in through `Summarizer`.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Protocol

import sqlalchemy as sa

from memwarden.embed import Embedder
from memwarden.records import (
    LIVE_STATUSES,
    MemoryRecord,
    MemoryType,
    Scope,
    SourceKind,
    Status,
    SummarizeInput,
    WriteReason,
    content_hash,
    sensitivity_rank,
)
from memwarden.stores.sql import SqlStore, _row_to_record
from memwarden.stores.sql_models import memories
from memwarden.stores.subjects import handle_row, new_handle, resolve_handle
from memwarden.stores.vectors import VectorIndex, index_point

SUMMARY_SLOT = "summary.episodic"
"""Summaries hold one slot per owner, so a newer summary supersedes the older (never two live)."""
MAX_SOURCES = 50
SUMMARY_NS = uuid.UUID("8a4e2f0d-51c3-4b8e-9f7a-3c1d2e6b9a40")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


SUBJECT_REF_TTL = timedelta(hours=1)


async def park_summary_request(
    store: SqlStore, key: bytes, *, tenant_id: str, owner_id: str, actor: str, now: datetime | None = None
) -> SummarizeInput:
    """SummarizeWorkflow's input for one owner: the owner and actor wait in the store, history gets a handle.

    The handle carries the owner's keyed hash (the receipts' `subject_hash`), so an owner erasure finds
    and deletes it; it expires after `SUBJECT_REF_TTL` (the retention sweep removes expired claim checks).
    """
    at = now or datetime.now(UTC)
    ref = new_handle(key, tenant_id, owner_id)
    await store.put_candidates(
        [handle_row(ref, tenant_id, {"owner_id": owner_id, "actor": actor}, at + SUBJECT_REF_TTL)]
    )
    return SummarizeInput(tenant_id=tenant_id, subject_ref=ref)


async def claim_summary_request(store: SqlStore, request: SummarizeInput) -> tuple[str, str] | None:
    """(owner id, actor) of a request; None when its handle is gone (expired, or the owner was erased)."""
    body = await resolve_handle(store, request.subject_ref)
    return None if body is None else (str(body["owner_id"]), str(body["actor"]))


class Summarizer(Protocol):
    """Turns source texts (newest first) into one summary text; must be deterministic for idempotency."""

    name: str

    def summarize(self, texts: Sequence[str], max_chars: int) -> str: ...


class ExtractiveSummarizer:
    """The first sentence of each source, joined, cut at `max_chars`: no model, nothing invented."""

    name = "extractive-v1"

    def summarize(self, texts: Sequence[str], max_chars: int) -> str:
        parts: list[str] = []
        used = 0
        for text in texts:
            first = _SENTENCE.split(text.strip(), maxsplit=1)[0].strip()
            if not first:
                continue
            cost = len(first) + (2 if parts else 0)
            if used + cost > max_chars:
                break
            parts.append(first)
            used += cost
        return "; ".join(parts)


def summary_id(tenant_id: str, owner_id: str, source_ids: Sequence[str], slot: str = SUMMARY_SLOT) -> str:
    """Deterministic: the same sources give the same summary id (a retried activity writes once).

    A session's summary (another slot) is named apart from the owner's, even over the same sources."""
    basis = f"{tenant_id}\x00{owner_id}\x00" + ",".join(sorted(source_ids))
    if slot != SUMMARY_SLOT:
        basis += f"\x00{slot}"
    return str(uuid.uuid5(SUMMARY_NS, basis))


async def summary_sources(store: SqlStore, tenant_id: str, owner_id: str) -> list[MemoryRecord]:
    """The owner's live episodic user-scope memories, newest first."""
    m = memories.c
    async with store.engine.connect() as conn:
        rows = (
            await conn.execute(
                sa.select(memories)
                .where(
                    m.tenant_id == tenant_id,
                    m.owner_id == owner_id,
                    m.scope == Scope.USER.value,
                    m.type == MemoryType.EPISODIC.value,
                    m.status.in_(sorted(s.value for s in LIVE_STATUSES)),
                    m.content.is_not(None),
                )
                .order_by(m.created_at.desc(), m.id.desc())
                .limit(MAX_SOURCES)
            )
        ).mappings()
        return [_row_to_record(r) for r in rows]


async def derive(
    store: SqlStore,
    index: VectorIndex,
    embedder: Embedder,
    summarizer: Summarizer,
    *,
    tenant_id: str,
    owner_id: str,
    sources: list[MemoryRecord],
    max_chars: int,
    actor: str,
    now: datetime | None = None,
    slot: str = SUMMARY_SLOT,
) -> MemoryRecord | None:
    """Write (idempotently) the summary of `sources` as the live summary of `slot` and index it.

    `slot` is the owner's summary by default; a session's consolidated episodes have their own
    (`summary.session.<key>`), so re-deriving one never supersedes the other."""
    texts = [s.content for s in sources if s.content]
    if not texts:
        return None
    text = summarizer.summarize(texts, max_chars)
    if not text:
        return None
    at = now or datetime.now(UTC)
    ids = [s.id for s in sources]
    record = MemoryRecord(
        id=summary_id(tenant_id, owner_id, ids, slot),
        tenant_id=tenant_id,
        owner_id=owner_id,
        scope=Scope.USER,
        type=MemoryType.SUMMARY,
        slot=slot,
        content=text,
        content_hash=content_hash(text),
        source_kind=SourceKind.APP,
        reason=WriteReason.DERIVED_SUMMARY.value,
        importance=max(s.importance for s in sources),
        sensitivity=max((s.sensitivity for s in sources), key=sensitivity_rank),
        status=Status.ACTIVE,
        valid_from=at,
        created_at=at,
        updated_at=at,
        provenance={"writer": f"{actor}|{summarizer.name}"},  # type: ignore[arg-type]
    )
    live, _ = await store.commit_live(record, derived_from=sorted(ids))
    if live.status in LIVE_STATUSES and live.content is not None:
        [dense] = await asyncio.to_thread(embedder.embed, [live.content])
        await index.upsert([index_point(live, dense)])
    return live


async def summaries_touching(
    store: SqlStore, tenant_id: str, ids: Sequence[str]
) -> list[tuple[MemoryRecord, list[str]]]:
    """Every summary version of the tenant whose lineage includes any of `ids`, with its lineage."""
    wanted = set(ids)
    m = memories.c
    found: list[tuple[MemoryRecord, list[str]]] = []
    async with store.engine.connect() as conn:
        rows = (
            await conn.execute(
                sa.select(memories).where(
                    m.tenant_id == tenant_id, m.type == MemoryType.SUMMARY.value, m.derived_from.is_not(None)
                )
            )
        ).mappings()
        for row in rows:
            lineage = [str(x) for x in (row["derived_from"] or [])]
            if wanted.intersection(lineage):
                found.append((_row_to_record(row), lineage))
    return found


async def purge_summary(store: SqlStore, tenant_id: str, memory_id: str, now: datetime) -> bool:
    """An old summary version: content gone, `purged`, out of its slot. True when it held content."""
    m = memories.c
    async with store.transaction() as conn:
        result = await conn.execute(
            sa.update(memories)
            .where(m.tenant_id == tenant_id, m.id == memory_id, m.content.is_not(None))
            .values(
                content=None,
                content_hash="",
                status=Status.PURGED.value,
                live_slot=None,
                tombstoned_at=sa.func.coalesce(m.tombstoned_at, now),
                purged_at=now,
                updated_at=now,
                version=m.version + 1,
            )
        )
    return result.rowcount == 1
