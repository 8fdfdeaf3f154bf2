"""Remember, the service: screen, decide, then commit, stage or record a candidate; settle a staged one.

All I/O of the write gate lives here; the decision itself is pure (`memwarden.policy.gate`) and is
made inside `RememberService.remember` (run by one local activity, one Temporal step, whose result the
workflow records). It is the only way a proposed candidate is stored; `settle` finishes what it staged.
Nothing here knows Temporal: the run, the clock and the stores are handed in (`activities.remember` is
the adapter).

Each operation is idempotent: the memory id is fixed by the API, the store's commit returns an
already-committed row unchanged, index upserts overwrite, and audit events carry an id derived from
(workflow run, operation, memory), so a retried attempt appends nothing twice.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict
from datetime import datetime, timedelta
from typing import Any

from memwarden import detect
from memwarden.errors import CandidateGone
from memwarden.policy.dedupe import cosine, value_conflict
from memwarden.policy.gate import (
    GateDecision,
    GatePolicy,
    GateReason,
    Lookup,
    Neighbour,
    Remembered,
    Screened,
    commit_input,
    decide,
    precheck,
    redact_entities,
)
from memwarden.prescreened import prescreened
from memwarden.records import (
    FORGOTTEN_STATUSES,
    LIVE_STATUSES,
    CommitInput,
    Decision,
    MemoryRecord,
    NamespaceClause,
    ReadFilter,
    RememberInput,
    RememberResult,
    Scope,
    Screening,
    SettleAction,
    SettleRequest,
    SourceKind,
    Status,
    content_hash,
    namespace_label,
)
from memwarden.services.deps import Deps
from memwarden.services.replicas import replicate
from memwarden.services.run import Run
from memwarden.stores.audit import AuditEventIn
from memwarden.stores.cache import invalidation_prefixes
from memwarden.stores.subjects import handle_ids, resolve_handle
from memwarden.stores.vectors import index_point

VECTOR_CACHE_SIZE = 512
DEDUPE_SCORE_SLACK = 0.01
"""Index scores are float32 cosines: a hit this far under the dedupe threshold is still read back and compared."""
UNTRUSTED_CONFIDENCE = 0.5
"""Confidence stored on untrusted observations (tool output): ranked and labelled below what a person said."""


def namespace_filter(c: RememberInput) -> ReadFilter:
    """Exactly the candidate's own namespace: dedupe and slots never reach across namespaces."""
    if c.scope is Scope.SHARED:
        clause = NamespaceClause(scope=Scope.SHARED, stores=(c.store or "",))
    elif c.scope is Scope.AGENT:
        clause = NamespaceClause(scope=Scope.AGENT, owner_ids=(c.owner_id,), agent_id=c.agent_id)
    else:
        clause = NamespaceClause(scope=Scope.USER, owner_ids=(c.owner_id,))
    return ReadFilter(tenant_id=c.tenant_id, clauses=(clause,), statuses=tuple(sorted(LIVE_STATUSES)))


_AUDIT_NS = uuid.UUID("0b6c1b0e-2f55-4c3e-8f0a-6b1d9a1e7c42")


ONCE_PER_MEMORY = frozenset({"create", "update", "stage", "confirm", "reject"})
"""State changes that happen to a memory at most once: their event is keyed by the memory alone, so a
second workflow that re-commits the same id (a crash, a replayed proposal) records nothing new."""


def audit_id(operation: str, memory_id: str | None, run: Run) -> str:
    """The event's idempotency id: per memory for state changes, per workflow run for decisions."""
    if operation in ONCE_PER_MEMORY and memory_id is not None:
        return str(uuid.uuid5(_AUDIT_NS, f"{operation}\x00{memory_id}"))
    return str(uuid.uuid5(_AUDIT_NS, f"{run.workflow_id}\x00{run.run_id}\x00{operation}\x00{memory_id}"))


def _clamp(similarity: float) -> float:
    """Float error can put a cosine of unit vectors a hair outside [-1, 1]."""
    return max(-1.0, min(1.0, similarity))


class RememberService:
    """Bound to one worker's Deps (its embedding cache is the worker's too)."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self._vectors: OrderedDict[str, list[float]] = OrderedDict()

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.deps.embedder.embed, texts)

    async def _vector(self, text: str, text_hash: str) -> list[float]:
        """The text's embedding, kept briefly by content hash: the commit reuses what screening computed.

        Local activities run in the worker that runs the workflow task, so the commit almost always finds
        it here; a miss (another worker, a restart) just embeds again. In memory only, never in history.
        """
        cached = self._vectors.get(text_hash)
        if cached is None:
            [cached] = await self._embed([text])
            self._remember_vector(text_hash, cached)
        else:
            self._vectors.move_to_end(text_hash)
        return cached

    def _remember_vector(self, text_hash: str, vector: list[float]) -> None:
        self._vectors[text_hash] = vector
        self._vectors.move_to_end(text_hash)
        if len(self._vectors) > VECTOR_CACHE_SIZE:
            self._vectors.popitem(last=False)

    def _event(
        self,
        c: RememberInput,
        run: Run,
        operation: str,
        reason: str,
        memory_id: str | None,
        *,
        actor: str | None = None,
        hash_after: str | None = None,
        key: str | None = None,
        **details: object,
    ) -> AuditEventIn:
        """`key` fixes the memory id the event's idempotency id is derived from (default: the event's own).

        A rejection carries no content hash: a rejected secret is what must not be guessable from the log.
        Every other hash is keyed per subject by the store (memwarden.stores.content_keys).
        """
        kept = {} if operation == "deny" else {"content_hash": c.content_hash}
        return AuditEventIn(
            id=audit_id(operation, key or memory_id or c.memory_id, run),
            at=self.deps.clock(),
            tenant_id=c.tenant_id,
            actor=actor or c.actor,
            operation=operation,
            memory_id=memory_id,
            namespace=namespace_label(c),
            reason=reason,
            workflow_id=run.workflow_id,
            hash_after=hash_after,
            details={**kept, "type": c.type.value, **details},
        )

    async def _hydrate(self, c: RememberInput) -> RememberInput:
        """The input with the ids its subject handle holds (history carries only the handle).

        After the handle is gone (expired past a long confirmation window) the stored row speaks for it;
        with neither (the owner was erased meanwhile) there is no one left to act for.
        """
        if c.subject_ref is None:
            return c
        return await self._hydrate_from(c, await resolve_handle(self.deps.store, c.subject_ref))

    async def _parked(self, c: RememberInput) -> tuple[RememberInput, str | None]:
        """`_hydrate`, and the parked content (None once an earlier attempt's effect dropped it), read
        in one statement: the content's embedding can start before anything else is read."""
        refs = [r for r in (c.subject_ref, c.candidate_ref) if r is not None]
        parked = await self.deps.store.get_candidates(refs)
        if c.subject_ref is not None:
            ids = handle_ids(c.subject_ref, parked.get(c.subject_ref))
            c = await self._hydrate_from(c, ids)
        return c, parked.get(c.candidate_ref)

    async def _hydrate_from(self, c: RememberInput, ids: dict[str, Any] | None) -> RememberInput:
        """The input with the ids its handle held (`ids`), or, with the handle gone, the stored row's."""
        if ids is None:
            row = await self.deps.store.get_memory(c.tenant_id, c.memory_id)
            if row is None:
                raise CandidateGone(c.memory_id)
            ids = {"owner_id": row.owner_id, "writer": row.provenance.writer, "speaker": row.provenance.speaker}
        writer, speaker = ids.get("writer"), ids.get("speaker")
        return c.model_copy(
            update={
                "owner_id": str(ids["owner_id"]),
                "provenance": c.provenance.model_copy(
                    update={
                        "writer": None if writer is None else str(writer),
                        "speaker": None if speaker is None else str(speaker),
                    }
                ),
            }
        )

    async def _hydrate_commit(self, ci: CommitInput) -> CommitInput:
        return (
            ci
            if ci.candidate.subject_ref is None
            else ci.model_copy(update={"candidate": await self._hydrate(ci.candidate)})
        )

    async def _screen(
        self,
        c: RememberInput,
        policy: GatePolicy,
        content: str,
        *,
        enabled: bool,
        quarantined: bool,
        screening: Screening | None = None,
        embedding: asyncio.Future[list[list[float]]] | None = None,
    ) -> tuple[Screened, str]:
        """Screening proper: detector codes, then (unless already rejected) the nearest live memory and the
        slot's holder. Returns what the gate decides on and the text that would be stored (redacted).

        The detectors (over the content and every other free-text field) always run in a worker thread:
        a hostile input must never hold the event loop the API shares. A bulk import passes `screening`: the
        same detectors, run for its whole batch in one worker thread beside the batch's embedding."""
        store = self.deps.store
        # Embedding (onnxruntime, off the GIL) runs beside the detectors (Python), on the other core:
        # most candidates are embedded as they are. The vector of a candidate that is then rejected or
        # redacted is dropped unused: it is never compared, cached or stored.
        # A bulk import embedded its whole batch in one call beforehand: the cached vector is the same one.
        # `embedding`: the caller started it already (Remember, before its screening reads).
        ready = self._vectors.get(content_hash(content))
        speculative = embedding
        if speculative is None and ready is None:
            speculative = asyncio.ensure_future(self._embed([content]))
        try:
            if screening is None:  # a bulk import screened its whole batch in one worker thread already
                screening = prescreened(c, content) or await detect.screen_async(
                    content, source_kind=c.source_kind, fields=detect.free_text_fields(c)
                )
        finally:
            [raw_dense] = await speculative if speculative is not None else [ready]
        screened = Screened(screening=screening, memory_enabled=enabled, source_quarantined=quarantined)
        inp = screened.gate_input(c)
        if precheck(inp, policy) is not None:
            return screened, content  # already a rejection: nothing is looked up for rejected text
        redact = redact_entities(inp, policy)
        text = detect.redact(content, redact) if redact else content
        text_hash = content_hash(text)
        if not redact:
            self._remember_vector(text_hash, raw_dense)
        dense = await self._vector(text, text_hash)

        async def nearest_live() -> Neighbour | None:
            hits = await self.deps.index.nearest(
                dense=dense, read_filter=namespace_filter(c), now_ts=self.deps.clock().timestamp(), limit=4
            )
            hits = [h for h in hits if h.memory_id != c.memory_id]
            if c.slot is None:
                # Only a duplicate changes the decision then (gate step 5), and equal text scores ~1.0: hits
                # below the threshold are not worth reading back from the store.
                hits = [h for h in hits if h.score >= policy.dedupe_threshold - DEDUPE_SCORE_SLACK]
            if not hits:
                return None
            found = await store.get_many(c.tenant_id, [h.memory_id for h in hits])
            for hit in hits:
                record = found.get(hit.memory_id)
                if record is not None and record.status in LIVE_STATUSES and record.content is not None:
                    return self._neighbour(record, text, text_hash, hit.score)
            return None

        async def slot_holder() -> MemoryRecord | None:
            if c.slot is None:
                return None
            return await store.live_slot_holder(c.tenant_id, c.owner_id, c.scope.value, c.agent_id, c.store, c.slot)

        nearest, holder = await asyncio.gather(nearest_live(), slot_holder())
        holder_n: Neighbour | None = None
        if holder is not None and holder.id != c.memory_id and holder.content is not None:
            if nearest is not None and nearest.memory_id == holder.id:
                holder_n = nearest
            else:
                [held] = await self._embed([holder.content])
                holder_n = self._neighbour(holder, text, text_hash, cosine(dense, held))
        return screened.model_copy(update={"lookup": Lookup(nearest=nearest, slot_holder=holder_n)}), text

    async def remember(self, c: RememberInput, policy: GatePolicy, run: Run) -> Remembered:
        """The whole write gate in one step: screen, decide (the pure `gate.decide`), then commit, stage or
        record the decision, each in one transaction that also drops the claim check.

        Idempotent: the claim check is dropped in the same transaction as the effect, so a parked content
        means nothing happened yet. A retry that finds it gone answers from what the effect left: the row
        (committed or pending) or the decision's audit event (REJECT, NOOP).
        """
        c, parked = await self._parked(c)
        if parked is None:
            return await self._remembered_before(c, run)
        # The embedding (onnxruntime, off the GIL) starts now, beside the reads below, on the other core.
        embedding = None
        if self._vectors.get(content_hash(parked)) is None:
            embedding = asyncio.ensure_future(self._embed([parked]))
        try:
            ref = c.source_ref
            enabled, content, quarantined = await self.deps.store.screen_inputs(
                c.tenant_id, c.owner_id, c.candidate_ref, (ref.system, ref.key) if ref is not None else None
            )
            if content is None:
                return await self._remembered_before(c, run)
            # Re-parked meanwhile (the same ref, other text)? Then `_screen` embeds the text it screens.
            screened, _ = await self._screen(
                c,
                policy,
                content,
                enabled=enabled,
                quarantined=quarantined,
                embedding=embedding if content == parked else None,
            )
        finally:
            if embedding is not None and not embedding.done():
                embedding.cancel()
        decision = decide(screened.gate_input(c), screened.lookup, policy)
        if decision.decision in (Decision.REJECT, Decision.NOOP):
            result = RememberResult(
                decision=decision.decision, reason=decision.reason.value, memory_id=decision.duplicate_of
            )
            operation = "deny" if decision.decision is Decision.REJECT else "noop"
            event = self._event(
                c, run, operation, result.reason, result.memory_id, key=c.memory_id, decision=decision.decision.value
            )
            await self.deps.store.record_decision(event, drop_candidate=c.candidate_ref)
            return Remembered(decision=decision, result=result)
        ci = commit_input(c, decision)
        now = self.deps.clock()
        if decision.decision is Decision.PENDING:
            record = self._record(ci, content, Status.PENDING, now)
            await self.deps.store.stage_pending(
                record,
                idempotency_key=c.idempotency_key,
                audit=lambda row: self._event(
                    c,
                    run,
                    "stage",
                    ci.reason,
                    c.memory_id,
                    hash_after=row.content_hash,
                    decision=Decision.PENDING.value,
                    redacted=sorted(ci.redact),
                ),
                drop_candidate=c.candidate_ref,
            )
            result = RememberResult(decision=Decision.PENDING, reason=ci.reason, memory_id=c.memory_id)
            return Remembered(decision=decision, result=result.model_copy(update={"supersedes": decision.supersedes}))
        record = self._record(ci, content, Status.ACTIVE, now)  # redacted as `_screen` redacted (same entities)
        return Remembered(decision=decision, result=await self._go_live(ci, record, run))

    async def _remembered_before(self, c: RememberInput, run: Run) -> Remembered:
        """The answer of an earlier attempt whose effect landed (the claim check is gone with it)."""
        store = self.deps.store
        existing = await store.get_memory(c.tenant_id, c.memory_id)
        if existing is None:
            for operation in ("deny", "noop"):
                event = await store.get_audit_event(audit_id(operation, c.memory_id, run))
                if event is not None and event.reason is not None:
                    decision = Decision.REJECT if operation == "deny" else Decision.NOOP
                    gate = GateDecision(
                        decision=decision,
                        reason=GateReason(event.reason),
                        step=1,
                        duplicate_of=event.memory_id if decision is Decision.NOOP else None,
                    )
                    result = RememberResult(decision=decision, reason=event.reason, memory_id=gate.duplicate_of)
                    return Remembered(decision=gate, result=result)
            raise CandidateGone(c.memory_id)
        untrusted = existing.confidence < 1.0 and existing.source_kind is SourceKind.TOOL
        lifetime = existing.expires_at - existing.created_at if existing.expires_at else None
        ttl = max(1, round(lifetime.total_seconds())) if lifetime else None
        if existing.status is Status.PENDING:
            staged = await store.get_audit_event(audit_id("stage", c.memory_id, run))
            reason = GateReason(staged.reason) if staged is not None and staged.reason else GateReason.STAGED_SENSITIVE
            gate = GateDecision(
                decision=Decision.PENDING,
                reason=reason,
                step=7,
                importance=existing.importance,
                ttl_seconds=ttl,
                untrusted=untrusted,
                staging=[reason],
            )
            result = RememberResult(decision=Decision.PENDING, reason=reason.value, memory_id=c.memory_id)
            return Remembered(decision=gate, result=result)
        # Committed (and perhaps since superseded or forgotten): the commit happened; answer as it did.
        decision = Decision.UPDATE if existing.supersedes else Decision.ADD
        reason = GateReason.SLOT_VALUE_CHANGED if existing.supersedes else GateReason.ACCEPTED
        gate = GateDecision(
            decision=decision,
            reason=reason,
            step=6 if existing.supersedes else 8,
            supersedes=existing.supersedes,
            importance=existing.importance,
            ttl_seconds=ttl,
            untrusted=untrusted,
        )
        result = RememberResult(
            decision=decision, reason=reason.value, memory_id=existing.id, supersedes=existing.supersedes
        )
        return Remembered(decision=gate, result=result)

    @staticmethod
    def _neighbour(record: MemoryRecord, text: str, text_hash: str, similarity: float) -> Neighbour:
        assert record.content is not None
        return Neighbour(
            memory_id=record.id,
            similarity=_clamp(similarity),
            value_conflict=value_conflict(text, record.content),
            same_content=record.content_hash == text_hash,
            slot=record.slot,
            source_kind=record.source_kind,
            status=record.status,
        )

    def _record(self, ci: CommitInput, content: str, status: Status, now: datetime) -> MemoryRecord:
        c = ci.candidate
        if ci.redact:
            content = detect.redact(content, ci.redact)
        untrusted = ci.untrusted or c.source_kind in (SourceKind.TOOL, SourceKind.MODEL)
        return MemoryRecord(
            id=c.memory_id,
            tenant_id=c.tenant_id,
            owner_id=c.owner_id,
            scope=c.scope,
            agent_id=c.agent_id,
            store=c.store,
            type=c.type,
            slot=c.slot,
            content=content,
            content_hash=content_hash(content),
            source_kind=c.source_kind,
            source_ref=c.source_ref,
            provenance=c.provenance,
            reason=c.reason,
            importance=ci.importance,
            confidence=UNTRUSTED_CONFIDENCE if untrusted else 1.0,
            sensitivity=c.sensitivity,
            status=status,
            expires_at=now + timedelta(seconds=ci.ttl_seconds) if ci.ttl_seconds else None,
            valid_from=now,
            last_confirmed_at=now if c.source_kind is SourceKind.USER else None,
            created_at=now,
            updated_at=now,
        )

    async def _go_live(
        self,
        ci: CommitInput,
        record: MemoryRecord,
        run: Run,
        *,
        operation: str | None = None,
        actor: str | None = None,
    ) -> RememberResult:
        """Durable store (superseding the slot's holder, with its audit event and the claim check dropped in
        the same transaction), then index, then cache invalidation, then replicas."""
        c = ci.candidate
        live, superseded = await self.deps.store.commit_live(
            record,
            idempotency_key=c.idempotency_key,
            audit=lambda live: self._live_event(ci, live, run, operation=operation, actor=actor),
            drop_candidate=c.candidate_ref,
        )
        if live.content is not None and live.status in LIVE_STATUSES:
            dense = await self._vector(live.content, live.content_hash)
            await self.deps.index.upsert([index_point(live, dense)])
        if superseded is not None:
            await self.deps.index.set_status([superseded], Status.SUPERSEDED)
        for prefix in invalidation_prefixes(live.tenant_id, live.scope, live.owner_id):
            await self.deps.cache.delete_prefix(prefix)
        for replicated in (live.id, superseded):  # then replicas (the superseded copy learns its new status)
            if replicated is not None:
                await replicate(self.deps, live.tenant_id, replicated)
        decision, reason = self._live_outcome(ci, live)
        return RememberResult(decision=decision, reason=reason, memory_id=live.id, supersedes=live.supersedes)

    @staticmethod
    def _live_outcome(ci: CommitInput, live: MemoryRecord) -> tuple[Decision, str]:
        """ADD or UPDATE, as the committed row says (a bulk import reads it the same way)."""
        decision = Decision.UPDATE if live.supersedes else Decision.ADD
        if decision is Decision.ADD and ci.reason == "slot_value_changed":
            return decision, "accepted"  # the holder went away between the gate and the commit
        return decision, ci.reason

    def _live_event(
        self,
        ci: CommitInput,
        live: MemoryRecord,
        run: Run,
        *,
        operation: str | None = None,
        actor: str | None = None,
    ) -> AuditEventIn:
        """The audit event of a commit, from the row it left."""
        decision, reason = self._live_outcome(ci, live)
        return self._event(
            ci.candidate,
            run,
            operation or ("create" if decision is Decision.ADD else "update"),
            reason,
            live.id,
            actor=actor,
            hash_after=live.content_hash,
            supersedes=live.supersedes,
            decision=decision.value,
            redacted=sorted(ci.redact),
        )

    async def settle(self, ci: CommitInput, request: SettleRequest, run: Run) -> RememberResult:
        """Confirmed: the pending row goes live (superseding the slot). Declined or timed out: rejected."""
        ci = await self._hydrate_commit(ci)
        c = ci.candidate
        store = self.deps.store
        current = await store.get_memory(c.tenant_id, c.memory_id)
        if current is None:
            raise CandidateGone(c.memory_id)
        if current.status in FORGOTTEN_STATUSES:  # forgotten while it waited: nothing is left to confirm
            return RememberResult(decision=Decision.REJECT, reason="forgotten", memory_id=c.memory_id)
        if current.status is Status.QUARANTINED:  # rolled back while it waited: the moderator releases it
            return RememberResult(decision=Decision.REJECT, reason="quarantined", memory_id=c.memory_id)
        if request.action is SettleAction.CONFIRM:
            if current.status is not Status.PENDING:  # a retry after the promotion landed
                decision = Decision.UPDATE if current.supersedes else Decision.ADD
                return RememberResult(
                    decision=decision, reason="confirmed", memory_id=current.id, supersedes=current.supersedes
                )
            now = self.deps.clock()
            lifetime = current.expires_at - current.created_at if current.expires_at else None
            record = current.model_copy(
                update={
                    "status": Status.ACTIVE,
                    "updated_at": now,
                    "last_confirmed_at": now,
                    "valid_from": now,
                    "expires_at": now + lifetime if lifetime else None,
                }
            )
            return await self._go_live(
                ci.model_copy(update={"reason": "confirmed"}), record, run, operation="confirm", actor=request.actor
            )
        reason = "declined" if request.action is SettleAction.DECLINE else "confirmation_window_passed"
        if current.status is Status.PENDING:  # the rejection and its event land in one transaction
            await store.reject_pending(
                c.tenant_id,
                c.memory_id,
                self.deps.clock(),
                audit=lambda _: self._event(
                    c, run, "reject", reason, c.memory_id, actor=request.actor, decision=Decision.REJECT.value
                ),
            )
        return RememberResult(decision=Decision.REJECT, reason=reason, memory_id=c.memory_id)
