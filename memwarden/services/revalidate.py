"""Revalidate, the service: ask a memory's system of record, then apply what it said.

`RevalidateService` holds the logic both paths share: the background/event/periodic check of one
memory (`revalidate`, run by the `revalidate_memory` activity) and the read path (`at_read`, called by
the retrieve service for the hits the freshness policy says to check, all at once, each bounded by its
source's timeout). Nothing here knows Temporal: the run the audit ids derive from is handed in. What a
source said is applied through `RevalidationStore` with its audit event in the same transaction, then
the index, the cache and the replicas follow, as on the commit path. Content from a source is screened
like any write (secrets, PII, length) before it may supersede anything; it never enters history,
spans, metrics or audit (hashes and codes only).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from opentelemetry.trace import Span

from memwarden import detect, telemetry
from memwarden.policy import freshness
from memwarden.policy.conflict import Claim, resolve
from memwarden.records import (
    LIVE_STATUSES,
    Consequence,
    Freshness,
    Hit,
    MemoryRecord,
    ReadCheck,
    RetrieveInput,
    RetrieveResult,
    RevalidateInput,
    RevalidateResult,
    RevalidationOutcome,
    SourceKind,
    Status,
    content_hash,
    namespace_label,
)
from memwarden.services.deps import Deps
from memwarden.services.replicas import replicate
from memwarden.services.run import Run
from memwarden.stores.audit import AuditEventIn, Operation
from memwarden.stores.cache import invalidation_prefixes
from memwarden.stores.revalidation import RevalidationStore
from memwarden.stores.sources import SourceAnswer
from memwarden.stores.sql import EligibleMeta
from memwarden.stores.vectors import index_point

ACTOR = "system:revalidate"
_NS = uuid.UUID("7f3c2a61-0d4e-4f55-9a3b-2c8e1b6d5a90")

Outcome = RevalidationOutcome


def successor_id(old: MemoryRecord, version: str | None, new_hash: str) -> str:
    """The id of the value a source replaced `old` with: the same answer always maps to the same row."""
    return str(uuid.uuid5(_NS, f"{old.id}\x00{version or ''}\x00{new_hash}"))


class RevalidateService:
    """Check memories at their sources and apply the answers (store, index, cache, replicas, audit)."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.store = RevalidationStore(deps.store)

    # -- asking ------------------------------------------------------------------------------

    async def check(self, record: MemoryRecord) -> SourceAnswer:
        """One conditional fetch with the source's own timeout (If-None-Match: the recorded version)."""
        ref = record.source_ref
        assert ref is not None
        return await self.deps.sources.fetch(
            ref.system, ref.key, ref.version, tenant=record.tenant_id, owner=record.owner_id
        )

    async def _ask(self, tenant: str, meta: EligibleMeta) -> SourceAnswer:
        assert meta.source_system is not None and meta.source_key is not None
        return await self.deps.sources.fetch(
            meta.source_system, meta.source_key, meta.source_version, tenant=tenant, owner=meta.owner_id
        )

    def rule_for(self, meta: EligibleMeta, consequence: Consequence) -> freshness.FreshnessRule:
        config = self.deps.sources.config(meta.source_system) if meta.source_system else None
        return freshness.rule(
            meta.type,
            consequence,
            has_source=meta.source_system is not None,
            volatile=config.volatile if config else False,
            window_seconds=config.freshness_seconds if config else None,
        )

    # -- audit -------------------------------------------------------------------------------

    def event(
        self,
        record: MemoryRecord,
        outcome: Outcome,
        answer_reason: str,
        *,
        trigger: str,
        attempt: int,
        run: Run,
        hash_after: str | None = None,
        new_memory_id: str | None = None,
    ) -> AuditEventIn:
        """The revalidate event: outcome as the reason code, the source's answer code, no content, no key."""
        workflow_id, run_id = run.workflow_id, run.run_id or ""
        details: dict[str, object] = {
            "trigger": trigger,
            "answer": answer_reason,
            "attempt": attempt,
            "source": record.source_ref.system if record.source_ref else None,
        }
        if new_memory_id is not None:
            details["new_memory_id"] = new_memory_id
        return AuditEventIn(
            id=str(uuid.uuid5(_NS, f"revalidate\x00{workflow_id}\x00{run_id}\x00{record.id}\x00{attempt}")),
            at=self.deps.clock(),
            tenant_id=record.tenant_id,
            actor=ACTOR,
            operation=Operation.REVALIDATE,
            memory_id=record.id,
            namespace=namespace_label(record),
            reason=outcome.value,
            workflow_id=workflow_id,
            hash_before=record.content_hash or None,
            hash_after=hash_after,
            details=details,
        )

    # -- applying ----------------------------------------------------------------------------

    def _span(self, tenant: str, memory_id: str, trigger: str, system: str | None) -> Span:
        """One `revalidate_memory` span per memory checked: ids, trigger, source, then outcome and reason."""
        return telemetry.start_operation_span(
            telemetry.REVALIDATE_MEMORY,
            tenant=tenant,
            attributes={
                telemetry.GEN_AI_MEMORY_RECORD_ID: memory_id,
                telemetry.TRIGGER: trigger,
                telemetry.SOURCE_SYSTEM: system,
            },
        )

    @staticmethod
    def _finish(span: Span, outcome: Outcome, reason: str, new_memory_id: str | None = None) -> None:
        telemetry.set_attributes(
            span,
            {
                telemetry.OUTCOME: outcome.value,
                telemetry.REASON: reason,
                telemetry.NEW_MEMORY_ID: new_memory_id,
            },
        )
        span.end()
        telemetry.metrics().record_revalidation(outcome.value)

    async def apply(
        self, record: MemoryRecord, answer: SourceAnswer, *, trigger: str, run: Run, attempt: int = 1
    ) -> RevalidateResult:
        """Apply one answer to one memory, inside a `revalidate_memory` span (ids and codes only)."""
        system = record.source_ref.system if record.source_ref else None
        span = self._span(record.tenant_id, record.id, trigger, system)
        try:
            result = await self._apply(record, answer, trigger=trigger, attempt=attempt, run=run)
        except BaseException as exc:
            telemetry.mark_error(span, type(exc).__name__)
            span.end()
            raise
        self._finish(span, result.outcome, result.reason, result.new_memory_id)
        return result

    async def _apply(
        self, record: MemoryRecord, answer: SourceAnswer, *, trigger: str, attempt: int, run: Run
    ) -> RevalidateResult:
        now = self.deps.clock()
        if answer.outcome is Outcome.CHANGED and answer.content is not None:
            if content_hash(answer.content) == record.content_hash:
                answer = answer.model_copy(update={"outcome": Outcome.UNCHANGED, "reason": "same_content"})
        if answer.outcome is Outcome.UNCHANGED:
            done = await self.store.confirm(
                [(record, answer.version)],
                now,
                lambda r: self.event(r, Outcome.UNCHANGED, answer.reason, trigger=trigger, attempt=attempt, run=run),
            )
            if record.id not in done:
                return self._moved_on(record, attempt)
            if record.status is Status.STALE:
                await self.deps.index.set_status([record.id], Status.ACTIVE)
            await self._derivatives(record, [record.id])
            return RevalidateResult(
                outcome=Outcome.UNCHANGED, memory_id=record.id, reason=answer.reason, attempts=attempt
            )
        if answer.outcome is Outcome.GONE:
            return await self._invalidate(
                record, answer.reason, Outcome.GONE, trigger=trigger, attempt=attempt, run=run
            )
        if answer.outcome is Outcome.CHANGED:
            return await self._changed(record, answer, now, trigger=trigger, attempt=attempt, run=run)
        # Unavailable: nothing changes; the attempt is on record.
        await self.deps.store.append_audit(
            self.event(record, Outcome.UNAVAILABLE, answer.reason, trigger=trigger, attempt=attempt, run=run)
        )
        return RevalidateResult(
            outcome=Outcome.UNAVAILABLE, memory_id=record.id, reason=answer.reason, attempts=attempt
        )

    def _moved_on(self, record: MemoryRecord, attempt: int) -> RevalidateResult:
        return RevalidateResult(outcome=Outcome.SKIPPED, memory_id=record.id, reason="not_live", attempts=attempt)

    async def _invalidate(
        self, record: MemoryRecord, reason: str, outcome: Outcome, *, trigger: str, attempt: int, run: Run
    ) -> RevalidateResult:
        now = self.deps.clock()
        done = await self.store.invalidate(
            record, now, lambda r: self.event(r, outcome, reason, trigger=trigger, attempt=attempt, run=run)
        )
        if done is None:
            return self._moved_on(record, attempt)
        await self.deps.index.set_status([record.id], Status.INVALIDATED)
        await self._derivatives(record, [record.id])
        return RevalidateResult(outcome=outcome, memory_id=record.id, reason=reason, attempts=attempt)

    def _screen(self, content: str) -> list[str]:
        """Codes that keep a source's value out of memory: the write gate's never-store rules still hold."""
        codes: list[str] = []
        if len(content) > self.deps.settings.max_content_chars:
            codes.append("content_too_large")
            return codes
        screening = detect.screen(content, source_kind=SourceKind.SYSTEM)
        if screening.deadline_exceeded:
            codes.append("detector_deadline")
        if screening.secrets:
            codes.append("secret_detected")
        if screening.pii:
            codes.append("pii_detected")
        return codes

    async def _changed(
        self, record: MemoryRecord, answer: SourceAnswer, now: datetime, *, trigger: str, attempt: int, run: Run
    ) -> RevalidateResult:
        assert answer.content is not None and record.source_ref is not None
        system = record.source_ref.system
        config = self.deps.sources.config(system)
        designated = config.system_of_record if config else False
        held = Claim(
            label="memory",
            source_kind=record.source_kind,
            designated=designated and record.source_kind is SourceKind.SYSTEM,
            observed_at=freshness.confirmed_at(record.last_confirmed_at, record.created_at),
        )
        incoming = Claim(
            label=f"source:{system}", source_kind=SourceKind.SYSTEM, designated=designated, observed_at=now
        )
        if resolve([held, incoming]) is held:
            await self.deps.store.append_audit(
                self.event(
                    record, Outcome.DISPUTED, "source_not_authoritative", trigger=trigger, attempt=attempt, run=run
                )
            )
            return RevalidateResult(
                outcome=Outcome.DISPUTED, memory_id=record.id, reason="source_not_authoritative", attempts=attempt
            )
        codes = await asyncio.to_thread(self._screen, answer.content)
        if codes:
            # The old value is no longer true, and the new one may not be stored: neither is served.
            result = await self._invalidate(
                record, f"source_value_rejected:{codes[0]}", Outcome.CHANGED, trigger=trigger, attempt=attempt, run=run
            )
            return result.model_copy(update={"reason": f"source_value_rejected:{codes[0]}"})
        new_hash = content_hash(answer.content)
        ref = record.source_ref.model_copy(update={"version": answer.version})
        new = record.model_copy(
            update={
                "id": successor_id(record, answer.version, new_hash),
                "content": answer.content,
                "content_hash": new_hash,
                "source_kind": SourceKind.SYSTEM,
                "source_ref": ref,
                "status": Status.ACTIVE,
                "supersedes": record.id,
                "superseded_by": None,
                "last_confirmed_at": now,
                "last_used_at": None,
                "valid_from": now,
                "created_at": now,
                "updated_at": now,
                "version": 1,
                "tombstoned_at": None,
                "purged_at": None,
            }
        )
        stored = await self.store.supersede(
            record,
            new,
            lambda r: self.event(
                record,
                Outcome.CHANGED,
                answer.reason,
                trigger=trigger,
                attempt=attempt,
                run=run,
                hash_after=r.content_hash,
                new_memory_id=r.id,
            ),
        )
        if stored is None:
            return self._moved_on(record, attempt)
        [dense] = await asyncio.to_thread(self.deps.embedder.embed, [answer.content])
        await self.deps.index.upsert([index_point(stored, dense)])
        await self.deps.index.set_status([record.id], Status.SUPERSEDED)
        await self._derivatives(record, [stored.id, record.id])
        return RevalidateResult(
            outcome=Outcome.CHANGED,
            memory_id=record.id,
            reason=answer.reason,
            new_memory_id=stored.id,
            attempts=attempt,
        )

    async def _derivatives(self, record: MemoryRecord, ids: Sequence[str]) -> None:
        """Cache invalidation, then replicas (each learns the row's new state), as on the commit path."""
        for prefix in invalidation_prefixes(record.tenant_id, record.scope, record.owner_id):
            await self.deps.cache.delete_prefix(prefix)
        for memory_id in ids:
            await replicate(self.deps, record.tenant_id, memory_id)

    # -- the read path -----------------------------------------------------------------------

    async def _record_read_checks(
        self,
        confirm: list[tuple[MemoryRecord, str | None]],
        answer_codes: Mapping[str, str],
        attempts: list[AuditEventIn],
        now: datetime,
        run: Run,
    ) -> None:
        """A read's confirmations with their audit events (and its other attempts' events) in one
        transaction, then a confirmed stale memory is active in the index again.

        Written before the search activity completes: a failure fails the activity, and its retry (same
        workflow run, so the same event ids) writes what is missing and nothing twice.
        """
        done = await self.store.confirm(
            confirm,
            now,
            lambda r: self.event(r, Outcome.UNCHANGED, answer_codes[r.id], trigger="read_time", attempt=1, run=run),
            extra=attempts,
        )
        stale = [r.id for r, _ in confirm if r.id in done and r.status is Status.STALE]
        if stale:
            await self.deps.index.set_status(stale, Status.ACTIVE)

    async def at_read(
        self,
        request: RetrieveInput,
        hits: list[Hit],
        withheld: list[dict[str, str]],
        spare: list[Hit],
        meta: Mapping[str, EligibleMeta],
        now: datetime,
        run: Run,
    ) -> RetrieveResult:
        """Check the hits the freshness policy names, all at once, each within its source's timeout.

        Unchanged -> `verified`; changed -> the source's value replaces the hit (`verified`); gone ->
        invalidated and withheld (`source_gone`); no answer in time -> the consequence's fallback
        (`unverified`, or withheld) and a background revalidation. Hits that drop out are replaced by
        spare hits that need no check, so a read never waits for a second round trip.
        """
        due = [
            h
            for h in hits
            if freshness.check_at_read(
                self.rule_for(meta[h.memory_id], request.consequence),
                meta[h.memory_id].status,
                meta[h.memory_id].last_confirmed_at,
                meta[h.memory_id].created_at,
                now,
            )
        ]
        if not due:
            return RetrieveResult(hits=hits, withheld=withheld)
        tenant = request.read_filter.tenant_id
        # The sources are asked from what ranking already read (system, key, version) while the full rows
        # load beside them: the read waits for one source round trip, not for a store read first.
        asking = [h.memory_id for h in due if meta[h.memory_id].source_key is not None]
        spans = {i: self._span(tenant, i, "read_time", meta[i].source_system) for i in asking}
        fetched, records = await asyncio.gather(
            asyncio.gather(*(self._ask(tenant, meta[i]) for i in asking)),
            self.deps.store.get_many(tenant, asking),
        )
        checks: list[ReadCheck] = []
        background: list[RevalidateInput] = []
        replaced: dict[str, str] = {}
        dropped: set[str] = set()
        confirm: list[tuple[MemoryRecord, str | None]] = []
        attempts: list[AuditEventIn] = []
        answer_codes: dict[str, str] = {}
        for memory_id, answer in zip(asking, fetched, strict=True):
            span = spans[memory_id]
            record = records.get(memory_id)
            if record is None or record.source_ref is None:  # gone from the store meanwhile: nothing to say
                self._finish(span, Outcome.SKIPPED, "not_live")
                continue
            # What the source was asked about is the row as ranked, before the question: applied only to it.
            record = record.model_copy(update={"version": meta[memory_id].version})
            if answer.outcome is Outcome.CHANGED and answer.content is not None:
                if content_hash(answer.content) == record.content_hash:
                    answer = answer.model_copy(update={"outcome": Outcome.UNCHANGED, "reason": "same_content"})
            if answer.outcome is Outcome.UNCHANGED:
                confirm.append((record, answer.version))
                answer_codes[record.id] = answer.reason
                checks.append(ReadCheck(memory_id=record.id, freshness=Freshness.VERIFIED, version=record.version))
                self._finish(span, Outcome.UNCHANGED, answer.reason)
                continue
            if answer.outcome is Outcome.UNAVAILABLE:
                fallback = freshness.on_deadline(request.consequence, record.status)
                if fallback.action is freshness.Fallback.WITHHELD:
                    withheld.append({"memory_id": record.id, "reason": fallback.reason or "source_unavailable"})
                    dropped.add(record.id)
                else:
                    checks.append(
                        ReadCheck(memory_id=record.id, freshness=Freshness.UNVERIFIED, version=record.version)
                    )
                attempts.append(
                    self.event(record, Outcome.UNAVAILABLE, answer.reason, trigger="read_time", attempt=1, run=run)
                )
                self._finish(span, Outcome.UNAVAILABLE, answer.reason)
                if answer.reason != "unknown_source":
                    background.append(
                        RevalidateInput(
                            tenant_id=tenant,
                            memory_id=record.id,
                            trigger="read_deadline",
                            max_attempts=self.deps.settings.revalidation_background_attempts,
                        )
                    )
                continue
            try:
                result = await self._apply(record, answer, trigger="read_time", attempt=1, run=run)
            except BaseException as exc:
                telemetry.mark_error(span, type(exc).__name__)
                span.end()
                raise
            self._finish(span, result.outcome, result.reason, result.new_memory_id)
            if result.outcome is Outcome.CHANGED and result.new_memory_id is not None:
                replaced[record.id] = result.new_memory_id
                checks.append(ReadCheck(memory_id=result.new_memory_id, freshness=Freshness.VERIFIED))
            elif result.outcome is Outcome.DISPUTED and request.consequence is Consequence.LOW:
                checks.append(ReadCheck(memory_id=record.id, freshness=Freshness.UNVERIFIED, version=record.version))
            else:
                reason = "source_gone" if result.outcome is Outcome.GONE else result.reason
                if result.outcome is Outcome.DISPUTED:
                    reason = "source_disputed"
                elif result.outcome is Outcome.SKIPPED:
                    reason = "stale"  # it changed while the source was asked: not served as current
                withheld.append({"memory_id": record.id, "reason": reason})
                dropped.add(record.id)
        if confirm or attempts:
            # What the sources said (last_confirmed_at, versions, audit events) is on record before the
            # activity completes, so no answer leaves with its confirmation still unwritten.
            await self._record_read_checks(confirm, answer_codes, attempts, now, run)
        out = [
            Hit(memory_id=replaced.get(h.memory_id, h.memory_id), score=h.score)
            for h in hits
            if h.memory_id not in dropped
        ]
        for hit in spare:
            if len(out) >= len(hits):
                break
            m = meta[hit.memory_id]
            if not freshness.check_at_read(
                self.rule_for(m, request.consequence), m.status, m.last_confirmed_at, m.created_at, now
            ):
                out.append(hit)
        return RetrieveResult(hits=out, withheld=withheld, checks=checks, background=background)

    # -- one memory, and the periodic sweep's plan --------------------------------------------

    async def revalidate(self, request: RevalidateInput, attempt: int, run: Run) -> RevalidateResult:
        """One check of one memory at its source, applied. A memory no longer live, or without a source,
        is skipped; repeating an attempt applies nothing twice (audit ids are per run and attempt)."""
        record = await self.deps.store.get_memory(request.tenant_id, request.memory_id)
        if record is None or record.status not in LIVE_STATUSES:
            return RevalidateResult(
                outcome=Outcome.SKIPPED, memory_id=request.memory_id, reason="not_live", attempts=attempt
            )
        if record.source_ref is None:
            return RevalidateResult(outcome=Outcome.SKIPPED, memory_id=record.id, reason="no_source", attempts=attempt)
        answer = await self.check(record)
        return await self.apply(record, answer, trigger=request.trigger, attempt=attempt, run=run)

    async def periodic_plan(self) -> list[RevalidateInput]:
        """Volatile source-backed memories not confirmed within half a sweep interval, oldest first, bounded."""
        settings = self.deps.settings
        before = self.deps.clock() - timedelta(seconds=settings.revalidation_sweep_seconds / 2)
        due = await self.store.due_periodic(
            self.deps.sources.volatile_systems(),
            [t.value for t in freshness.VOLATILE_TYPES],
            before,
            settings.revalidation_batch,
        )
        return [RevalidateInput(tenant_id=t, memory_id=m, trigger="periodic") for t, m in due]
