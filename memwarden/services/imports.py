"""Bulk import's batches: one batch of parked lines through Remember's write gate, committed at once.

The gate is Remember's own, not a copy: each line is screened by `RememberService._screen` (the
detectors, the nearest live memory, the slot's holder), decided by the pure `gate.decide`, and stored
as `_record` builds it with `_event`'s audit events. What a batch adds is throughput: the batch's
texts are embedded in one embedder call, screenings overlap, and every effect, audit event and
per-line outcome lands in one transaction (`SqlStore.commit_import_batch`).

Sequential meaning is kept: a line whose slot, memory id or near-duplicate text meets an earlier line
of the same batch in the same namespace ends the batch before it, so it is decided in the next batch
against what the earlier line left (the committed, indexed memory), exactly as if they came one by one.

Idempotent per line: a retried batch (the worker killed half way) finds the lines it committed no
longer parked and skips them; it re-derives their index points, and re-reads their outcomes (counts,
PENDING windows) from the store, whichever attempt wrote them.

A conversation line is not decided here: the batch stops at it and parks it as `POST /v1/conversations`
does, the workflow runs ConversationWorkflow for it (extraction, one RememberWorkflow per candidate through
the gate, consolidation, release), and `conversation_line` then records the line's one outcome
(`conversation_outcome`) and drops the parked line in one transaction. Re-running that child under its
id (derived from the conversation, as the route derives it) stores nothing twice: its candidates' memory
ids are derived from the session and the turns, and the ones already stored come back `replayed`.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from memwarden import detect
from memwarden.errors import ImportGone
from memwarden.keys import Purpose
from memwarden.policy.dedupe import value_conflict
from memwarden.policy.gate import GateDecision, GatePolicy, commit_input, decide
from memwarden.policy.imports import (
    LINE_PRECEDENCE,
    ConversationLineDone,
    ImportBatch,
    ImportBatchResult,
    ImportConversation,
    LineDecided,
    add_counts,
)
from memwarden.prescreened import prescreened
from memwarden.records import (
    LIVE_STATUSES,
    CommitInput,
    Decision,
    MemoryRecord,
    MemoryType,
    PendingWrite,
    RememberInput,
    Screening,
    Status,
    content_hash,
    namespace_label,
)
from memwarden.services.conversations import ImportedConversation, conversation_workflow_id
from memwarden.services.deps import Deps
from memwarden.services.remember import DEDUPE_SCORE_SLACK, RememberService
from memwarden.services.replicas import replicate
from memwarden.services.run import Run
from memwarden.stores.cache import invalidation_prefixes
from memwarden.stores.sql.imports import CANDIDATE, CONVERSATION, LineEffect, LineOutcome, ParkedLine
from memwarden.stores.subjects import handle_row, new_handle
from memwarden.stores.vectors import index_point

log = logging.getLogger(__name__)

LAST_LINE = 2**31 - 1
SCREEN_CONCURRENCY = 4
"""Lines whose index and store look-ups are in flight at once (their detectors already ran)."""


VALUE_VETO_TYPES = frozenset({MemoryType.PREFERENCE, MemoryType.FACT, MemoryType.PROCEDURAL})
"""Types whose PII is refused, never redacted: the text the gate compares is the line's own, so a value
conflict between two lines' raw texts vetoes them being duplicates exactly as it would in the gate."""


def batch_cut(lines: list[tuple[int, RememberInput, str]], vectors: list[list[float]], threshold: float) -> int:
    """How many leading lines can be decided together without one depending on another's effect.

    The first line that shares a memory id or a slot with an earlier line of the namespace, or that the
    gate could find a duplicate of one (within the dedupe threshold, and no value conflict between them
    where the raw texts are what the gate compares), starts the next batch. At least one line is taken.
    """
    ids: set[str] = set()
    slots: set[tuple[str, str]] = set()
    by_namespace: dict[str, list[int]] = {}
    matrix = np.asarray(vectors, dtype=np.float32) if vectors else np.zeros((0, 0), dtype=np.float32)
    for k, (_, c, text) in enumerate(lines):
        namespace = namespace_label(c)
        earlier = by_namespace.setdefault(namespace, [])
        if k and (
            c.memory_id in ids
            or (c.slot is not None and (namespace, c.slot) in slots)
            or any(_may_duplicate(c, text, lines[i][1], lines[i][2]) for i in _close(matrix, earlier, k, threshold))
        ):
            return k
        ids.add(c.memory_id)
        if c.slot is not None:
            slots.add((namespace, c.slot))
        earlier.append(k)
    return len(lines)


def _close(matrix: np.ndarray, earlier: list[int], k: int, threshold: float) -> list[int]:
    if not earlier:
        return []
    similarities = matrix[earlier] @ matrix[k]
    return [i for i, s in zip(earlier, similarities.tolist(), strict=True) if s >= threshold]


def _may_duplicate(a: RememberInput, a_text: str, b: RememberInput, b_text: str) -> bool:
    if a.type in VALUE_VETO_TYPES and b.type in VALUE_VETO_TYPES:
        return not value_conflict(a_text, b_text)
    return True  # a redacting type: the texts the gate compares are not known before screening


def screen_all(lines: list[tuple[int, RememberInput, str]]) -> list[Screening]:
    """Each line's screening: the API's, made before it parked the line, when it is of this very text
    (`memwarden.prescreened`); else the detectors, as `remember_candidate` runs them (each within its own
    time budget), one after another in the calling thread."""
    return [
        prescreened(c, text) or detect.screen(text, source_kind=c.source_kind, fields=detect.free_text_fields(c))
        for _, c, text in lines
    ]


class ImportService:
    """Bound to one worker's Deps and its RememberService (the gate's code and its vector cache)."""

    def __init__(self, deps: Deps, remember: RememberService) -> None:
        self.deps = deps
        self.remember = remember

    async def batch(self, job: ImportBatch, run: Run) -> ImportBatchResult:
        """Decide and commit up to `job.limit` parked lines from `job.position` (see the module's docstring).

        A conversation line at the head (for a caller that runs them, `job.conversations`) is handed over
        instead: parked for its ConversationWorkflow as `POST /v1/conversations` parks one, and returned
        for the workflow to run; it stays parked until `conversation_line` records its outcome.

        Raises `ImportGone` when the import no longer exists (nothing a retry could bring back)."""
        store = self.deps.store
        await self._exists(job.tenant_id, job.import_id)
        parked = await store.parked_lines(job.import_id, from_line=job.position, limit=job.limit)
        # Lines decided before this attempt (refused at upload, or committed by an attempt that died).
        before = (parked[0].line_no - 1) if parked else LAST_LINE
        earlier = await store.import_outcomes_between(job.import_id, job.position, before)
        await self._rederive(job.tenant_id, [o.memory_id for o in earlier if o.decision in ("ADD", "UPDATE")])
        if parked and parked[0].kind == CONVERSATION and job.conversations:
            return await self._hand_over(job, parked[0])
        effects, taken = await self._effects(job, parked, run)
        now = self.deps.clock()
        applied = await store.commit_import_batch(job.import_id, effects, now)
        await self._derive(
            job.tenant_id, [a.live for a in applied if a.live is not None], [a.superseded for a in applied]
        )
        done = taken == len(parked) and len(parked) < job.limit
        next_position = LAST_LINE if done else parked[taken].line_no if taken < len(parked) else parked[-1].line_no + 1
        counts, pending, decided = await self._decided(job.import_id, job.position, next_position - 1)
        if done:
            await store.set_import_status(job.import_id, "done", expect=("running",), at=now)
        log.info("import batch: %d lines decided, %d applied now", decided, len(applied))
        return ImportBatchResult(next_position=next_position, done=done, counts=counts, pending=pending)

    async def _exists(self, tenant_id: str, import_id: str) -> None:
        if await self.deps.store.get_import(tenant_id, import_id) is None:
            raise ImportGone(import_id)

    async def _decided(self, import_id: str, first: int, last: int) -> tuple[dict[str, int], list[PendingWrite], int]:
        """Counts by decision of the lines first..last recorded so far (whichever attempt recorded them), the
        PENDING ones' sealed commits, and how many lines that is."""
        outcomes = await self.deps.store.import_outcomes_between(import_id, first, last)
        counts: dict[str, int] = {}
        for o in outcomes:
            counts = add_counts(counts, {o.decision: 1})
        pending = [PendingWrite.model_validate_json(o.pending_commit) for o in outcomes if o.pending_commit]
        return counts, pending, len(outcomes)

    async def _hand_over(self, job: ImportBatch, line: ParkedLine) -> ImportBatchResult:
        """Park the conversation line for its ConversationWorkflow (a retried attempt parks the same ref again)."""
        conversation = ImportedConversation.model_validate_json(line.payload)
        request = await conversation.park(
            self.deps.store, self.deps.settings.key_for(Purpose.SUBJECT_HANDLES), parked_at=self.deps.clock()
        )
        counts, pending, _ = await self._decided(job.import_id, job.position, line.line_no - 1)
        return ImportBatchResult(
            next_position=line.line_no + 1,
            done=False,
            counts=counts,
            pending=pending,
            conversation=ImportConversation(
                line_no=line.line_no, workflow_id=conversation_workflow_id(request), request=request
            ),
        )

    async def conversation_line(self, done: ConversationLineDone) -> LineDecided:
        """Record a conversation line's outcome once its ConversationWorkflow ended, dropping the parked line in
        the same transaction; a retried call finds it recorded and answers what was recorded.

        Nothing is applied here: the child applied the candidates (each through the gate, each audited)."""
        store = self.deps.store
        await self._exists(done.tenant_id, done.import_id)
        parked = await store.parked_lines(done.import_id, from_line=done.line_no, limit=1)
        if parked and parked[0].line_no == done.line_no:
            outcome = conversation_outcome(ImportedConversation.model_validate_json(parked[0].payload), done)
            effect = LineEffect(done.line_no, "decision", outcome, None)
            await store.commit_import_batch(done.import_id, [effect], self.deps.clock())
        [recorded] = await store.import_outcomes_between(done.import_id, done.line_no, done.line_no)
        return LineDecided(decision=recorded.decision)

    async def _effects(self, job: ImportBatch, parked: list[ParkedLine], run: Run) -> tuple[list[LineEffect], int]:
        """Each line's effect, for as many leading lines as can be decided together; and how many that is.

        The dispatch by kind: candidate lines pass the gate here; a line of a kind the caller does not run
        (a conversation, for an ImportWorkflow run from before its patch) is reported per line.
        """
        head = [other_kind(line) for line in _leading(parked, lambda kind: kind != CANDIDATE)]
        if head:
            return head, len(head)  # batches are of one kind: these first, the candidates after them next
        candidates = []
        for line in _leading(parked, lambda kind: kind == CANDIDATE):
            body = json.loads(line.payload)
            candidates.append((line.line_no, RememberInput.model_validate(body["input"]), str(body["content"])))
        effects = await self._candidate_effects(job, candidates, run)
        return effects, len(effects)

    async def _candidate_effects(
        self, job: ImportBatch, lines: list[tuple[int, RememberInput, str]], run: Run
    ) -> list[LineEffect]:
        """Embed the batch in one call, cut it where lines depend on each other, screen and decide each line
        with Remember's gate, and build its effect."""
        policy = job.policy
        # The embedder (onnxruntime, off the GIL) and the detectors (Python) each take a core: the batch's
        # texts are embedded in one call while its lines are screened one after another in one thread.
        screenings, vectors = await asyncio.gather(
            asyncio.to_thread(screen_all, lines), self.remember._embed([content for _, _, content in lines])
        )
        cut = batch_cut(lines, vectors, policy.dedupe_threshold - DEDUPE_SCORE_SLACK)
        lines, vectors, screenings = lines[:cut], vectors[:cut], screenings[:cut]
        for (_, _, content), vector in zip(lines, vectors, strict=True):
            self.remember._remember_vector(content_hash(content), vector)
        existing = await self.deps.store.get_many(job.tenant_id, [c.memory_id for _, c, _ in lines])
        inputs = await self._screen_inputs(lines)
        gate = asyncio.Semaphore(SCREEN_CONCURRENCY)

        async def decided(c: RememberInput, content: str, screening: Screening) -> GateDecision | None:
            if c.memory_id in existing:
                return None  # a keyed line already stored: answered as a replay, not gated again
            enabled, quarantined = inputs[_inputs_key(c)]
            async with gate:
                screened, _ = await self.remember._screen(
                    c, policy, content, enabled=enabled, quarantined=quarantined, screening=screening
                )
            return decide(screened.gate_input(c), screened.lookup, policy)

        decisions = await asyncio.gather(
            *(decided(c, content, s) for (_, c, content), s in zip(lines, screenings, strict=True))
        )
        now = self.deps.clock()
        return [
            self._effect(n, c, content, d, existing.get(c.memory_id), policy, now, run)
            for (n, c, content), d in zip(lines, decisions, strict=True)
        ]

    async def _screen_inputs(self, lines: list[tuple[int, RememberInput, str]]) -> dict[Any, tuple[bool, bool]]:
        """The owner's memory switch and the cited source's quarantine, read once per distinct pair."""
        found: dict[Any, tuple[bool, bool]] = {}
        for _, c, _ in lines:
            key = _inputs_key(c)
            if key not in found:
                source = (c.source_ref.system, c.source_ref.key) if c.source_ref is not None else None
                enabled, _, quarantined = await self.deps.store.screen_inputs(c.tenant_id, c.owner_id, "", source)
                found[key] = (enabled, quarantined)
        return found

    def _effect(
        self,
        n: int,
        c: RememberInput,
        content: str,
        decision: GateDecision | None,
        existing: MemoryRecord | None,
        policy: GatePolicy,
        now: datetime,
        run: Run,
    ) -> LineEffect:
        r = self.remember
        if decision is None:
            assert existing is not None
            return LineEffect(n, "decision", replayed(n, c, content, existing), None)
        if decision.decision in (Decision.REJECT, Decision.NOOP):
            operation = "deny" if decision.decision is Decision.REJECT else "noop"
            reason = decision.reason.value
            event = r._event(
                c, run, operation, reason, decision.duplicate_of, key=c.memory_id, decision=decision.decision.value
            )
            outcome = LineOutcome(n, decision.decision.value, reason, memory_id=decision.duplicate_of)
            return LineEffect(n, "decision", outcome, event)
        ci = commit_input(c, decision)
        if decision.decision is Decision.PENDING:
            sealed, handle = self._sealed(ci, policy, now)
            pending = PendingWrite(
                commit=sealed, window_seconds=policy.confirmation_window_seconds, stage_reason=decision.reason.value
            )
            return LineEffect(
                n,
                "pending",
                LineOutcome(n, "PENDING", ci.reason, memory_id=c.memory_id, pending_commit=pending.model_dump_json()),
                lambda row: r._event(
                    c,
                    run,
                    "stage",
                    ci.reason,
                    c.memory_id,
                    hash_after=row.content_hash,
                    decision=Decision.PENDING.value,
                    redacted=sorted(ci.redact),
                ),
                record=r._record(ci, content, Status.PENDING, now),
                idempotency_key=c.idempotency_key,
                parked=[handle],
            )
        return LineEffect(
            n,
            "live",
            _live_outcome(n, ci, r),
            lambda live: r._live_event(ci, live, run),
            record=r._record(ci, content, Status.ACTIVE, now),
            idempotency_key=c.idempotency_key,
        )

    def _sealed(
        self, ci: CommitInput, policy: GatePolicy, now: datetime
    ) -> tuple[CommitInput, tuple[str, str, str, datetime]]:
        """The PENDING line's commit input as history may hold it (its people behind a subject handle)."""
        c = ci.candidate
        handle = new_handle(self.deps.settings.key_for(Purpose.SUBJECT_HANDLES), c.tenant_id, c.owner_id)
        ids: dict[str, str | None] = {"owner_id": c.owner_id, "writer": c.provenance.writer}
        if c.provenance.speaker is not None:
            ids["speaker"] = c.provenance.speaker
        expires = now + timedelta(seconds=policy.confirmation_window_seconds) + timedelta(days=1)
        sealed = c.model_copy(
            update={
                "owner_id": "",
                "provenance": c.provenance.model_copy(update={"writer": None, "speaker": None}),
                "subject_ref": handle,
            }
        )
        return ci.model_copy(update={"candidate": sealed}), handle_row(handle, c.tenant_id, ids, expires)

    async def _derive(self, tenant_id: str, live: list[MemoryRecord], superseded: list[str | None]) -> None:
        """After the commit: index points in one upsert, superseded points' status, the owners' cached
        searches, replicas. Idempotent (upserts overwrite), so a retried batch may do it again."""
        indexed = [m for m in live if m.content is not None and m.status in LIVE_STATUSES]
        if indexed:
            dense = [await self.remember._vector(m.content or "", m.content_hash) for m in indexed]
            await self.deps.index.upsert([index_point(m, v) for m, v in zip(indexed, dense, strict=True)])
        gone = [s for s in superseded if s is not None]
        if gone:
            await self.deps.index.set_status(gone, Status.SUPERSEDED)
        prefixes = {p for m in live for p in invalidation_prefixes(m.tenant_id, m.scope, m.owner_id)}
        for prefix in sorted(prefixes):
            await self.deps.cache.delete_prefix(prefix)
        if self.deps.replicas:
            for memory_id in [m.id for m in live] + gone:
                await replicate(self.deps, tenant_id, memory_id)

    async def _rederive(self, tenant_id: str, memory_ids: list[str | None]) -> None:
        """Derivatives of lines an earlier attempt committed (it may have died before indexing them)."""
        ids = [m for m in memory_ids if m is not None]
        if not ids:
            return
        found = await self.deps.store.get_many(tenant_id, ids)
        records = [found[i] for i in ids if i in found]
        await self._derive(tenant_id, records, [r.supersedes for r in records])


def _inputs_key(c: RememberInput) -> tuple[str, str | None, str | None]:
    ref = c.source_ref
    return c.owner_id, ref.system if ref else None, ref.key if ref else None


def _live_outcome(n: int, ci: CommitInput, r: RememberService) -> Callable[[MemoryRecord], LineOutcome]:
    def outcome(live: MemoryRecord) -> LineOutcome:
        decision, reason = r._live_outcome(ci, live)
        return LineOutcome(n, decision.value, reason, memory_id=live.id)

    return outcome


def replayed(n: int, c: RememberInput, content: str, existing: MemoryRecord) -> LineOutcome:
    """A keyed line whose memory exists: the same text is a replay (as `POST /v1/memories` answers it),
    another text under the same key is refused."""
    if existing.content_hash not in (content_hash(content), c.content_hash):
        return LineOutcome(n, "ERROR", "idempotency_key_reused", field="idempotency_key")
    if existing.status is Status.PENDING:
        decision = Decision.PENDING
    else:
        decision = Decision.UPDATE if existing.supersedes else Decision.ADD
    return LineOutcome(n, decision.value, "replayed", memory_id=existing.id)


def _leading(parked: list[ParkedLine], keep: Callable[[str], bool]) -> list[ParkedLine]:
    """The leading lines whose kind `keep` accepts."""
    out: list[ParkedLine] = []
    for line in parked:
        if not keep(line.kind):
            break
        out.append(line)
    return out


def conversation_outcome(line: ImportedConversation, done: ConversationLineDone) -> LineOutcome:
    """A conversation line's one outcome: the strongest decision among its candidates and its withheld
    messages (`LINE_PRECEDENCE`), with that candidate's reason and memory id (the first in message order);
    a REJECT names the message it came from (`messages.N.content`). Nothing proposed and nothing withheld is
    `NOOP nothing_extracted`; a ConversationWorkflow that gave no answer is `ERROR` with why."""
    if done.result is None:
        return LineOutcome(done.line_no, "ERROR", done.failure or "conversation_failed")
    by_decision: dict[str, list[tuple[int, str, str | None]]] = {}
    for o in done.result.outcomes:
        # The workflow numbers the parked messages; the line's numbering counts the withheld ones too.
        index = line.kept[o.message_index] if 0 <= o.message_index < len(line.kept) else o.message_index
        by_decision.setdefault(o.decision.value, []).append((index, o.reason, o.memory_id))
    for index, reason in line.withheld.items():
        by_decision.setdefault(Decision.REJECT.value, []).append((index, reason, None))
    for decision in LINE_PRECEDENCE:
        if decision in by_decision:
            index, reason, memory_id = min(by_decision[decision], key=lambda e: e[0])
            field = f"messages.{index}.content" if decision == Decision.REJECT.value else None
            return LineOutcome(done.line_no, decision, reason, field=field, memory_id=memory_id)
    return LineOutcome(done.line_no, Decision.NOOP.value, "nothing_extracted")


def other_kind(line: ParkedLine) -> LineEffect:
    """A parked line of a kind the caller does not run: reported on its line (`unsupported_line_kind`), the
    rest go on."""
    return LineEffect(line.line_no, "decision", LineOutcome(line.line_no, "ERROR", "unsupported_line_kind"), None)
