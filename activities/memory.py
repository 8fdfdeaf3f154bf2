"""Activities for Remember and Retrieve: thin, idempotent wrappers over the stores.

Each may run twice (a retry after a crash between the write and the completion): the memory id is
fixed by the caller, inserts return the existing row, index upserts overwrite the same point.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from temporalio import activity

from activities.deps import Deps
from activities.indexing import index_point
from memwarden.records import (
    Decision,
    Hit,
    MemoryRecord,
    RememberInput,
    RememberResult,
    RetrieveInput,
    RetrieveResult,
    SourceKind,
    Status,
)
from memwarden.stores.audit import AuditEventIn
from memwarden.stores.cache import invalidation_prefixes
from workflows.names import COMMIT_MEMORY, INDEX_HEALTH, SEARCH_MEMORIES


class CandidateGone(Exception):
    """The claim-checked content is missing and no record exists: nothing can be committed."""


class MemoryActivities:
    """Bound to one worker's Deps; registered by method."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.deps.embedder.embed, texts)

    @activity.defn(name=COMMIT_MEMORY)
    async def commit_memory(self, candidate: RememberInput) -> RememberResult:
        """The pre-gate commit: only RememberWorkflow runs recorded before the gate schedule it (replay).

        Durable store, then index, then cache invalidation; the claim check is dropped last.
        """
        store = self.deps.store
        existing = await store.get_memory(candidate.tenant_id, candidate.memory_id)
        if existing is None:
            content = await store.get_candidate(candidate.candidate_ref)
            if content is None:
                raise CandidateGone(candidate.memory_id)
            now = datetime.now(UTC)
            expires = now + timedelta(seconds=candidate.ttl_seconds) if candidate.ttl_seconds else None
            record = MemoryRecord(
                id=candidate.memory_id,
                tenant_id=candidate.tenant_id,
                owner_id=candidate.owner_id,
                scope=candidate.scope,
                agent_id=candidate.agent_id,
                store=candidate.store,
                type=candidate.type,
                slot=candidate.slot,
                content=content,
                content_hash=candidate.content_hash,
                source_kind=candidate.source_kind,
                source_ref=candidate.source_ref,
                provenance=candidate.provenance,
                reason=candidate.reason,
                importance=candidate.importance if candidate.importance is not None else 0.5,
                sensitivity=candidate.sensitivity,
                status=Status.ACTIVE,
                expires_at=expires,
                valid_from=now,
                last_confirmed_at=now if candidate.source_kind is SourceKind.USER else None,
                created_at=now,
                updated_at=now,
            )
            existing = await store.insert_memory(record, idempotency_key=candidate.idempotency_key)
            await store.append_audit(
                AuditEventIn(
                    tenant_id=record.tenant_id,
                    actor=candidate.actor,
                    operation="create",
                    memory_id=record.id,
                    namespace=f"{record.scope.value}:{record.owner_id}",
                    reason="accepted",
                    policy_version=record.policy_version,
                    workflow_id=activity.info().workflow_id,
                    details={"content_hash": record.content_hash, "type": record.type.value},
                )
            )
        if existing.content is not None and existing.status in (Status.ACTIVE, Status.STALE):
            [dense] = await self._embed([existing.content])
            await self.deps.index.upsert([index_point(existing, dense)])
        for prefix in invalidation_prefixes(existing.tenant_id, existing.scope, existing.owner_id):
            await self.deps.cache.delete_prefix(prefix)
        await store.delete_candidate(candidate.candidate_ref)
        return RememberResult(decision=Decision.ADD, reason="accepted", memory_id=existing.id)

    @activity.defn(name=SEARCH_MEMORIES)
    async def search_memories(self, request: RetrieveInput) -> RetrieveResult:
        """Filtered hybrid search, then eligibility re-checked against the store (the index may lag)."""
        now = datetime.now(UTC)
        query = request.query
        if request.query_ref is not None:
            parked = await self.deps.store.get_candidate(request.query_ref)
            if parked is None:
                raise CandidateGone(request.query_ref)
            query = parked
        [dense] = await self._embed([query])
        hits = await self.deps.index.search(
            dense=dense,
            text=query,
            read_filter=request.read_filter,
            now_ts=now.timestamp(),
            limit=request.k * 2,
        )
        records = await self.deps.store.eligible(request.read_filter, [h.memory_id for h in hits], now)
        allowed = {r.id for r in records}
        kept = [Hit(memory_id=h.memory_id, score=h.score) for h in hits if h.memory_id in allowed]
        return RetrieveResult(hits=kept[: request.k])

    @activity.defn(name=INDEX_HEALTH)
    async def index_health(self) -> bool:
        return await self.deps.index.health()

    def all(self) -> list[object]:
        return [self.commit_memory, self.search_memories, self.index_health]
