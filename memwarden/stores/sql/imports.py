"""Bulk imports: the import's row, its parked lines (the claim check) and each line's outcome.

A line is applied at most once because its outcome row (keyed by import and line number) is written in
the same transaction as its effect (the memory, its audit event) and the deletion of its parked row: a
retried batch finds the line no longer parked and skips it. The API parks lines and records the ones
it refused; `ImportService.batch` commits a batch's effects with `commit_import_batch`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from memwarden.records import MemoryRecord
from memwarden.stores.audit import AuditEventIn
from memwarden.stores.sql import statements as Q
from memwarden.stores.sql.memories import ConcurrencyConflict, MemoryRows
from memwarden.stores.sql_models import import_lines, import_outcomes, imports


@dataclass(frozen=True)
class ImportRow:
    id: str
    tenant_id: str
    actor_hash: str
    file_sha256: str
    total_lines: int
    status: str
    workflow_id: str | None
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None


CANDIDATE, CONVERSATION = "candidate", "conversation"
"""The kinds of parked line: a `POST /v1/memories` body, a `POST /v1/conversations` body."""


@dataclass(frozen=True)
class ParkedLine:
    line_no: int
    kind: str
    payload: str
    subject_hash: str | None = None
    """The owner's handle hash, so an erasure of the owner finds the line (None: no one's)."""


@dataclass(frozen=True)
class LineOutcome:
    """What became of one line: codes and ids only."""

    line_no: int
    decision: str
    reason: str
    field: str | None = None
    memory_id: str | None = None
    pending_commit: str | None = None


Outcome = Callable[[MemoryRecord], LineOutcome]
"""A line's outcome from the row its effect left (ADD or UPDATE is known only once the slot is read)."""


@dataclass
class LineEffect:
    """One line's effect in a batch: `live` (commit, superseding the slot), `pending` (stage), `decision`
    (REJECT, NOOP: an audit event only). `audit` and `outcome` see the stored row."""

    line_no: int
    kind: Literal["live", "pending", "decision"]
    outcome: Outcome | LineOutcome
    audit: Callable[[MemoryRecord], AuditEventIn] | AuditEventIn | None
    record: MemoryRecord | None = None
    idempotency_key: str | None = None
    parked: list[tuple[str, str, str, datetime]] = field(default_factory=list)
    """Claim-check rows to park with the effect (a PENDING line's subject handle)."""


@dataclass(frozen=True)
class Applied:
    """A committed line: its outcome and, for live lines, the row and the id it superseded (to index)."""

    outcome: LineOutcome
    live: MemoryRecord | None = None
    superseded: str | None = None


def _import_row(row: Any) -> ImportRow:
    return ImportRow(**{k: row[k] for k in ImportRow.__dataclass_fields__})


class ImportRows(MemoryRows):
    """Reads and writes of `imports`, `import_lines` and `import_outcomes`."""

    async def create_import(self, row: ImportRow) -> ImportRow:
        """Create the import, or return the one already under this id (the same file from the same caller)."""
        values = {k: getattr(row, k) for k in ImportRow.__dataclass_fields__}
        async with self._write() as conn:
            await conn.execute(self._insert(imports).values(**values).on_conflict_do_nothing())
            stored = (await conn.execute(sa.select(imports).where(imports.c.id == row.id))).mappings().one()
        return _import_row(stored)

    async def get_import(self, tenant_id: str, import_id: str) -> ImportRow | None:
        i = imports.c
        async with self._read(single_statement=True) as conn:
            row = (await conn.execute(sa.select(imports).where(i.id == import_id, i.tenant_id == tenant_id))).mappings()
            found = row.first()
        return _import_row(found) if found is not None else None

    async def park_import_lines(
        self, import_id: str, tenant_id: str, parked: Sequence[ParkedLine], refused: Sequence[LineOutcome], at: datetime
    ) -> int:
        """Park admitted lines and record refused ones, in one transaction; a line already received (parked
        or decided) is left as it is, so a re-sent chunk changes nothing. Returns how many were new."""
        if not parked and not refused:
            return 0
        numbers = [p.line_no for p in parked] + [r.line_no for r in refused]
        async with self._write() as conn:
            seen = await self._received(conn, import_id, numbers)
            lines = [
                {
                    "import_id": import_id,
                    "line_no": p.line_no,
                    "tenant_id": tenant_id,
                    "kind": p.kind,
                    "payload": p.payload,
                    "subject_hash": p.subject_hash,
                }
                for p in parked
                if p.line_no not in seen
            ]
            outcomes = [_outcome_row(import_id, r, at) for r in refused if r.line_no not in seen]
            if lines:
                await conn.execute(sa.insert(import_lines), lines)
            if outcomes:
                await conn.execute(sa.insert(import_outcomes), outcomes)
        return len(lines) + len(outcomes)

    async def _received(self, conn: Any, import_id: str, numbers: Sequence[int]) -> set[int]:
        found: set[int] = set()
        for table in (import_lines, import_outcomes):
            for start in range(0, len(numbers), 500):
                chunk = numbers[start : start + 500]
                stmt = sa.select(table.c.line_no).where(table.c.import_id == import_id, table.c.line_no.in_(chunk))
                found.update((await conn.execute(stmt)).scalars())
        return found

    async def import_received(self, import_id: str) -> int:
        """How many of the import's lines arrived (parked or decided)."""
        async with self._read() as conn:
            parked = await conn.scalar(sa.select(sa.func.count()).where(import_lines.c.import_id == import_id))
            decided = await conn.scalar(sa.select(sa.func.count()).where(import_outcomes.c.import_id == import_id))
        return int(parked or 0) + int(decided or 0)

    async def first_missing_line(self, import_id: str, total: int) -> int | None:
        """The lowest line number in 1..total that has not arrived, or None when every line has."""
        async with self._read() as conn:
            numbers: set[int] = set()
            for table in (import_lines, import_outcomes):
                numbers.update(
                    (await conn.execute(sa.select(table.c.line_no).where(table.c.import_id == import_id))).scalars()
                )
        for n in range(1, total + 1):
            if n not in numbers:
                return n
        return None

    async def set_import_status(
        self,
        import_id: str,
        status: str,
        *,
        expect: Sequence[str],
        at: datetime,
        workflow_id: str | None = None,
    ) -> bool:
        """Move the import to `status` if it is in one of `expect`; True when it moved (or was already there)."""
        i = imports.c
        values: dict[str, Any] = {"status": status}
        if status == "running":
            values |= {"started_at": at, "workflow_id": workflow_id}
        elif status == "done":
            values["completed_at"] = at
        async with self._write() as conn:
            current = await conn.scalar(sa.select(i.status).where(i.id == import_id))
            if current == status:
                return True
            if current not in expect:
                return False
            await conn.execute(sa.update(imports).where(i.id == import_id).values(**values))
        return True

    async def parked_lines(self, import_id: str, *, from_line: int, limit: int) -> list[ParkedLine]:
        """The next parked lines from `from_line`, in order."""
        t = import_lines.c
        stmt = (
            sa.select(t.line_no, t.kind, t.payload)
            .where(t.import_id == import_id, t.line_no >= from_line)
            .order_by(t.line_no)
            .limit(limit)
        )
        async with self._read() as conn:
            return [ParkedLine(r.line_no, r.kind, r.payload) for r in await conn.execute(stmt)]

    async def import_outcomes_between(self, import_id: str, first: int, last: int) -> list[LineOutcome]:
        """The outcomes recorded for lines first..last (inclusive), in order."""
        o = import_outcomes.c
        stmt = (
            sa.select(o.line_no, o.decision, o.reason, o.field, o.memory_id, o.pending_commit)
            .where(o.import_id == import_id, o.line_no >= first, o.line_no <= last)
            .order_by(o.line_no)
        )
        async with self._read() as conn:
            return [LineOutcome(*r) for r in await conn.execute(stmt)]

    async def import_counts(self, import_id: str) -> dict[str, int]:
        """Lines decided so far, by decision (ADD, UPDATE, NOOP, PENDING, REJECT, ERROR)."""
        o = import_outcomes.c
        stmt = sa.select(o.decision, sa.func.count()).where(o.import_id == import_id).group_by(o.decision)
        async with self._read() as conn:
            return {str(d): int(n) for d, n in await conn.execute(stmt)}

    async def import_position(self, import_id: str) -> int | None:
        """The lowest line still parked (waiting for the workflow), or None when none is."""
        async with self._read(single_statement=True) as conn:
            found = await conn.scalar(
                sa.select(sa.func.min(import_lines.c.line_no)).where(import_lines.c.import_id == import_id)
            )
        return int(found) if found is not None else None

    async def import_errors(self, import_id: str, *, after: int, limit: int) -> list[LineOutcome]:
        """Lines that were not applied (refused at the door, or rejected by the gate), by line number."""
        o = import_outcomes.c
        stmt = (
            sa.select(o.line_no, o.decision, o.reason, o.field, o.memory_id)
            .where(o.import_id == import_id, o.decision.in_(("ERROR", "REJECT")), o.line_no > after)
            .order_by(o.line_no)
            .limit(limit)
        )
        async with self._read() as conn:
            return [LineOutcome(*r) for r in await conn.execute(stmt)]

    async def commit_import_batch(self, import_id: str, effects: Sequence[LineEffect], at: datetime) -> list[Applied]:
        """Every effect of a batch, its audit events, its outcomes and the parked rows' deletion: one transaction.

        Only lines still parked are applied: one a concurrent or earlier attempt decided is skipped (on
        PostgreSQL the parked rows are locked first, so two attempts serialize on them). A slot race with
        another writer fails the whole batch (`ConcurrencyConflict`); retried, it supersedes the winner.
        """
        if not effects:
            return []
        numbers = [e.line_no for e in effects]
        t = import_lines.c
        try:
            async with self._write() as conn:
                claim = sa.select(t.line_no).where(t.import_id == import_id, t.line_no.in_(numbers))
                if self.dialect == "postgresql":
                    claim = claim.with_for_update()
                still = set((await conn.execute(claim)).scalars())
                applied: list[Applied] = []
                events: list[AuditEventIn] = []
                parked: list[tuple[str, str, str, datetime]] = []
                for effect in effects:
                    if effect.line_no not in still:
                        continue
                    done = await self._apply(conn, effect, events)
                    applied.append(done)
                    parked.extend(effect.parked)
                await conn.run_sync(self._append_audit_many, events)
                if parked:
                    upsert = Q.upsert_candidate(self.dialect)
                    for ref, tenant_id, content, expires_at in parked:
                        params = {"ref": ref, "tenant_id": tenant_id, "content": content}
                        await conn.execute(upsert, params | {"created_at": at, "expires_at": expires_at})
                if applied:
                    await conn.execute(
                        sa.insert(import_outcomes), [_outcome_row(import_id, a.outcome, at) for a in applied]
                    )
                    done_lines = [a.outcome.line_no for a in applied]
                    await conn.execute(
                        sa.delete(import_lines).where(t.import_id == import_id, t.line_no.in_(done_lines))
                    )
        except IntegrityError as exc:
            raise ConcurrencyConflict(import_id, None, None) from exc
        return applied

    async def _apply(self, conn: Any, effect: LineEffect, events: list[AuditEventIn]) -> Applied:
        if effect.kind == "decision":
            assert isinstance(effect.outcome, LineOutcome)
            if isinstance(effect.audit, AuditEventIn):  # a replayed or unsupported line has no event
                events.append(effect.audit)
            return Applied(effect.outcome)
        assert effect.record is not None and callable(effect.audit)
        if effect.kind == "pending":
            stored = await conn.run_sync(self._stage_pending_in, effect.record, idempotency_key=effect.idempotency_key)
            events.append(effect.audit(stored))
            return Applied(_outcome_of(effect, stored))
        live, superseded, fresh = await conn.run_sync(
            self._commit_live_in, effect.record, idempotency_key=effect.idempotency_key
        )
        if fresh:
            events.append(effect.audit(live))
        return Applied(_outcome_of(effect, live), live=live, superseded=superseded)


def _outcome_of(effect: LineEffect, row: MemoryRecord) -> LineOutcome:
    return effect.outcome if isinstance(effect.outcome, LineOutcome) else effect.outcome(row)


def _outcome_row(import_id: str, o: LineOutcome, at: datetime) -> dict[str, Any]:
    return {
        "import_id": import_id,
        "line_no": o.line_no,
        "decision": o.decision,
        "reason": o.reason,
        "field": o.field[:128] if o.field else None,
        "memory_id": o.memory_id,
        "pending_commit": o.pending_commit,
        "at": at,
    }


async def forget_parked_lines(conn: AsyncConnection, tenant_id: str, subject_hash: str | None, at: datetime) -> int:
    """An erasure's parked import lines: each decided `ERROR forgotten` and dropped, in the caller's transaction.

    `subject_hash` (the owner's handle hash) selects that owner's lines; None every line of the tenant.
    """
    t = import_lines.c
    where = [t.tenant_id == tenant_id] + ([t.subject_hash == subject_hash] if subject_hash is not None else [])
    found = (await conn.execute(sa.select(t.import_id, t.line_no).where(*where))).all()
    if not found:
        return 0
    await conn.execute(
        sa.insert(import_outcomes),
        [_outcome_row(i, LineOutcome(n, "ERROR", "forgotten"), at) for i, n in found],
    )
    await conn.execute(sa.delete(import_lines).where(*where))
    return len(found)
