"""The audit log: one global hash chain of events, signed checkpoints of its head, and its verification.

Appends are serialized (SQLite's write lock, a PostgreSQL advisory transaction lock), so the previous
hash read under the lock is still the last one when the new row lands: the chain never forks. Every
change elsewhere in the store appends its event through `_append_audit` inside its own transaction, so a
change is never stored without its event, or the other way round.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from memwarden.audit_signing import Checkpoint, CheckpointSigner, CheckpointVerifier
from memwarden.records import MemoryRecord
from memwarden.stores.audit import (
    GENESIS_HASH,
    AuditEvent,
    AuditEventIn,
    AuditVerification,
    Pseudonymizer,
    chain_hash,
)
from memwarden.stores.content_keys import ContentKeys
from memwarden.stores.sql import statements as Q
from memwarden.stores.sql.cursors import _decode_audit_cursor, _encode_cursor
from memwarden.stores.sql.engine import SqlEngine
from memwarden.stores.sql.rows import _utcnow
from memwarden.stores.sql_models import audit_checkpoints, audit_events

_log = logging.getLogger("memwarden.audit")

_AUDIT_LOCK_KEY = 0x6D77_6175_6469_7400
"""pg_advisory_xact_lock key that serializes appends to the audit chain ("mwaudit")."""
_VERIFY_BATCH = 1000
_AUDIT_FIELDS: tuple[str, ...] = tuple(AuditEventIn.model_fields)
_AUDIT_BATCH = 500
"""Events per INSERT (and per id lookup) in `append_audit_many`."""


class AuditLog(SqlEngine):
    """The store's audit chain; `SqlStore` sets the signer, the checkpoint interval and the pseudonymizer."""

    _signer: CheckpointSigner | None
    _checkpoint_every: int
    _pseudonyms: Pseudonymizer | None
    content_keys: ContentKeys

    async def get_audit_event(self, event_id: str) -> AuditEvent | None:
        """One event by its id (a retried activity reads back the decision it recorded)."""
        stmt = sa.select(audit_events).where(audit_events.c.id == event_id)
        row = await self._query(lambda conn: conn.execute(stmt).mappings().first(), single_statement=True)
        return AuditEvent.model_validate(dict(row)) if row is not None else None

    async def append_audit(self, event: AuditEventIn) -> str:
        """Append one event to the global hash chain; returns its id.

        Appends are serialized (SQLite write lock, PostgreSQL advisory transaction lock), so the
        previous hash read here is still the last one when this row lands: the chain never forks.
        An id already in the chain is not appended again (retried activities). With a signer, the
        head is checkpointed in the same transaction once `checkpoint_every` events have passed
        since the last checkpoint.
        """
        await self._transact(lambda conn: self._append_audit(conn, event))
        return event.id

    def _append_audit(self, conn: Connection, event: AuditEventIn, *, row: MemoryRecord | None = None) -> None:
        """`append_audit` inside a transaction the caller holds (so a change and its event land together);
        from an `AsyncConnection`, `await conn.run_sync(store._append_audit, event)`.

        `row`: the memory the caller wrote in this transaction, whose owner keys the event's content hashes."""
        [event] = self.content_keys.seal(conn, [event], None if row is None else {row.id: row.owner_id})
        if self._pseudonyms is not None:
            event = self._pseudonyms.event(event)
        self._lock_audit(conn)
        # One statement: is this id already in the chain, the head's hash, the last checkpoint.
        seen, prev, last = conn.execute(Q.AUDIT_CHAIN_STATE, {"id": event.id}).one()
        if seen is not None:
            return
        prev_hash = prev or GENESIS_HASH
        head_hash = chain_hash(prev_hash, event)
        values = {f: getattr(event, f) for f in _AUDIT_FIELDS} | {"prev_hash": prev_hash, "hash": head_hash}
        seq = conn.scalar(Q.INSERT_AUDIT_EVENT, values)
        if self._signer is not None and int(seq) - int(last or 0) >= self._checkpoint_every:
            self._write_checkpoint(conn, int(seq), head_hash, int(last or 0))

    async def append_audit_many(self, events: Sequence[AuditEventIn]) -> int:
        """`append_audit` for many events in one transaction (a deletion's per-memory events)."""
        return await self._transact(lambda conn: self._append_audit_many(conn, events))

    def _append_audit_many(self, conn: Connection, events: Sequence[AuditEventIn]) -> int:
        """Chain many events in their order with batched inserts; ids already present are skipped.

        One round trip per `_AUDIT_BATCH` events instead of three per event, so an erasure of thousands
        of memories records its events in a few round trips. Checkpoints land exactly where one-by-one
        appends would have put them. Returns how many events were new.
        """
        events = self.content_keys.seal(conn, events)
        if self._pseudonyms is not None:
            events = [self._pseudonyms.event(e) for e in events]
        a = audit_events.c
        self._lock_audit(conn)
        present: set[str] = set()
        ids = [e.id for e in events]
        for start in range(0, len(ids), _AUDIT_BATCH):
            chunk = ids[start : start + _AUDIT_BATCH]
            present.update(conn.execute(sa.select(a.id).where(a.id.in_(chunk))).scalars())
        fresh: list[AuditEventIn] = []
        for e in events:
            if e.id not in present:
                present.add(e.id)
                fresh.append(e)
        if not fresh:
            return 0
        prev_hash = conn.scalar(sa.select(a.hash).order_by(a.seq.desc()).limit(1)) or GENESIS_HASH
        rows: list[dict[str, Any]] = []
        for e in fresh:
            head_hash = chain_hash(prev_hash, e)
            rows.append({**{f: getattr(e, f) for f in _AUDIT_FIELDS}, "prev_hash": prev_hash, "hash": head_hash})
            prev_hash = head_hash
        last = int(conn.scalar(sa.select(sa.func.max(audit_checkpoints.c.seq))) or 0)
        for start in range(0, len(rows), _AUDIT_BATCH):
            batch = rows[start : start + _AUDIT_BATCH]
            returned = conn.execute(
                sa.insert(audit_events).returning(a.seq, a.hash, sort_by_parameter_order=True), batch
            )
            placed = [(int(r.seq), str(r.hash)) for r in returned]
            # The chain is in seq order: the batch must have been numbered in the order it was hashed.
            if [h for _, h in placed] != [r["hash"] for r in batch] or any(
                x[0] >= y[0] for x, y in itertools.pairwise(placed)
            ):
                raise RuntimeError("audit batch was not numbered in insertion order")
            if self._signer is not None:
                for seq, head_hash in placed:
                    if seq - last >= self._checkpoint_every:
                        self._write_checkpoint(conn, seq, head_hash, last)
                        last = seq
        return len(fresh)

    def _lock_audit(self, conn: Connection) -> None:
        """Serialize chain appends: PostgreSQL's advisory lock (SQLite already holds its write lock)."""
        if self.dialect == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:k)"), {"k": _AUDIT_LOCK_KEY})

    def _write_checkpoint(self, conn: Connection, seq: int, head_hash: str, prev_seq: int) -> Checkpoint:
        assert self._signer is not None
        # Counted incrementally (the previous checkpoint's count plus the events since), so a
        # checkpoint costs O(interval), not O(chain), while the chain lock is held.
        a, c = audit_events.c, audit_checkpoints.c
        before = 0
        if prev_seq:
            before = int(conn.scalar(sa.select(c.event_count).where(c.seq == prev_seq)) or 0)
        since = conn.scalar(sa.select(sa.func.count()).select_from(audit_events).where(a.seq > prev_seq, a.seq <= seq))
        count = before + int(since or 0)
        checkpoint = self._signer.sign(seq=seq, head_hash=head_hash, event_count=count, prev_seq=prev_seq, at=_utcnow())
        conn.execute(sa.insert(audit_checkpoints).values(**checkpoint.model_dump()))
        # Debug only: this transaction may still roll back. Heads are published, once committed, by
        # memwarden.audit_heads (a file, the service log, an HTTP sink), which verification reads.
        _log.debug(
            "audit checkpoint seq=%d head=%s count=%d key=%s sig=%s",
            seq,
            head_hash,
            count,
            checkpoint.key_id,
            checkpoint.signature,
        )
        return checkpoint

    async def checkpoint_audit(self) -> Checkpoint | None:
        """Sign the current head now (None without a signer, or when the head is already signed)."""
        if self._signer is None:
            return None
        a, c = audit_events.c, audit_checkpoints.c

        def sign_head(conn: Connection) -> Checkpoint | None:
            self._lock_audit(conn)
            head = conn.execute(sa.select(a.seq, a.hash).order_by(a.seq.desc()).limit(1)).first()
            last = int(conn.scalar(sa.select(sa.func.max(c.seq))) or 0)
            if head is None or int(head.seq) == last:
                return None
            return self._write_checkpoint(conn, int(head.seq), head.hash, last)

        return await self._transact(sign_head)

    async def list_checkpoints(self, *, limit: int = 100) -> list[Checkpoint]:
        """The newest checkpoints first (for operators and tests)."""
        c = audit_checkpoints.c
        async with self._read() as conn:
            rows = (await conn.execute(sa.select(audit_checkpoints).order_by(c.seq.desc()).limit(limit))).mappings()
            return [Checkpoint.model_validate(dict(row)) for row in rows]

    async def list_audit(
        self,
        tenant_id: str,
        *,
        memory_id: str | None = None,
        deletion_id: str | None = None,
        actor: str | None = None,
        operation: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        oldest_first: bool = False,
        limit: int,
        cursor: str | None,
    ) -> tuple[list[AuditEvent], str | None]:
        """A tenant's events, newest first (or oldest first), filtered; opaque keyset cursor.

        `since` is inclusive and `until` exclusive (`at` is the time the event was recorded). `actor`
        is given in the clear (`user:alice`) and matched in its stored, pseudonymous form too. A
        cursor is only valid with the ordering that produced it.
        """
        if limit < 1:
            raise ValueError("limit")
        after = _decode_audit_cursor(cursor, oldest_first) if cursor is not None else None
        a = audit_events.c
        stmt = sa.select(audit_events).where(a.tenant_id == tenant_id)
        for column, value in ((a.memory_id, memory_id), (a.deletion_id, deletion_id)):
            if value is not None:
                stmt = stmt.where(column == value)
        if actor is not None:
            # Events are stored with the actor pseudonymous; rows written before that hold it raw.
            forms = {actor, self._pseudonyms.actor(tenant_id, actor)} if self._pseudonyms else {actor}
            stmt = stmt.where(a.actor.in_(sorted(forms)))
        if operation is not None:
            stmt = stmt.where(a.operation == operation)
        if since is not None:
            stmt = stmt.where(a.at >= since)
        if until is not None:
            stmt = stmt.where(a.at < until)
        if after is not None:
            stmt = stmt.where(a.seq > after if oldest_first else a.seq < after)
        stmt = stmt.order_by(a.seq.asc() if oldest_first else a.seq.desc()).limit(limit + 1)
        async with self._read() as conn:
            rows = (await conn.execute(stmt)).mappings().all()
        page = [AuditEvent.model_validate(dict(row)) for row in rows[:limit]]
        next_cursor = None
        if len(rows) > limit:
            next_cursor = _encode_cursor({"s": page[-1].seq, "o": "a"} if oldest_first else {"s": page[-1].seq})
        return page, next_cursor

    async def audit_tenants_of(self, memory_id: str) -> list[str]:
        """Which tenants have events for this memory id (the CLI's `audit show` without --tenant)."""
        a = audit_events.c
        async with self._read() as conn:
            rows = await conn.execute(sa.select(a.tenant_id).where(a.memory_id == memory_id).distinct())
            return sorted(r[0] for r in rows)

    async def verify_audit(self) -> tuple[bool, int | None]:
        """Recompute the whole chain: (True, None), or (False, seq of the first event that fails).

        Links only; `verify_audit_chain` also checks the signed checkpoints.
        """
        result = await self.verify_audit_chain(None)
        return result.ok, result.broken_seq

    async def verify_audit_chain(
        self,
        verifier: CheckpointVerifier | None,
        *,
        require_every: int | None = None,
        published: Sequence[Checkpoint] = (),
    ) -> AuditVerification:
        """Walk every event and every checkpoint in order; name the first broken link.

        Links: each event's `prev_hash` is the previous event's `hash`, and its `hash` is
        recomputed from its canonical form. Checkpoints (when `verifier` is given): each one ends
        at an existing event whose hash it names, counts the events up to it, points at the
        checkpoint before it, and carries a valid signature from a known key. `require_every`
        also fails a chain whose newest events went longer than that without a checkpoint (a
        deleted checkpoint, or a writer that bypassed the signer). `published` are the heads published
        outside the database (memwarden.audit_heads): the chain must still hold each one, signed by a
        known key, so a tail deleted or rewritten with the chain recomputed fails; the result says how
        many events are past the newest.
        """
        a = audit_events.c
        checkpoints: list[Checkpoint] = []
        if verifier is not None:
            async with self._read() as conn:
                rows = (await conn.execute(sa.select(audit_checkpoints).order_by(audit_checkpoints.c.seq))).mappings()
                checkpoints = [Checkpoint.model_validate(dict(row)) for row in rows]
        pending = iter(checkpoints)
        next_cp = next(pending, None)
        anchors: dict[int, Checkpoint] = {}
        for head in published:
            anchors.setdefault(head.seq, head)
        last_anchor = 0
        prev_cp_seq = 0
        checked_cps = 0
        prev_hash = GENESIS_HASH
        last_seq = 0
        count = 0

        def broken(seq: int, reason: str) -> AuditVerification:
            return AuditVerification(
                ok=False,
                events=count,
                checkpoints=checked_cps,
                broken_seq=seq,
                reason=reason,
                last_good_checkpoint=prev_cp_seq or None,
                last_published_seq=last_anchor or None,
            )

        async with self._read() as conn:
            while True:
                rows = (
                    await conn.execute(
                        sa.select(audit_events).where(a.seq > last_seq).order_by(a.seq).limit(_VERIFY_BATCH)
                    )
                ).mappings()
                batch = 0
                for row in rows:
                    batch += 1
                    seq = int(row["seq"])
                    if next_cp is not None and next_cp.seq < seq:
                        return broken(next_cp.seq, "checkpoint_event_missing")
                    stored = AuditEventIn.model_construct(**{f: row[f] for f in _AUDIT_FIELDS})
                    if row["prev_hash"] != prev_hash:
                        return broken(seq, "prev_hash_mismatch")
                    if row["hash"] != chain_hash(prev_hash, stored):
                        return broken(seq, "hash_mismatch")
                    count += 1
                    prev_hash = row["hash"]
                    last_seq = seq
                    anchor = anchors.get(seq)
                    if anchor is not None:
                        if anchor.head_hash != row["hash"]:
                            return broken(seq, "published_head_mismatch")
                        if verifier is not None and verifier.check(anchor) is not None:
                            return broken(seq, "published_head_signature_invalid")
                        last_anchor = seq
                    if next_cp is not None and next_cp.seq == seq:
                        reason = _checkpoint_problem(next_cp, row["hash"], count, prev_cp_seq, verifier)
                        if reason is not None:
                            return broken(seq, reason)
                        checked_cps += 1
                        prev_cp_seq = seq
                        next_cp = next(pending, None)
                if batch < _VERIFY_BATCH:
                    break
        if next_cp is not None:
            return broken(next_cp.seq, "events_missing_after_checkpoint")
        beyond = [s for s in anchors if s > last_seq]
        if beyond:
            return broken(min(beyond), "events_missing_before_published_head")
        if require_every is not None and verifier is not None and last_seq - prev_cp_seq > require_every:
            return broken(last_seq, "checkpoint_missing")
        return AuditVerification(
            ok=True,
            events=count,
            checkpoints=checked_cps,
            head_seq=last_seq or None,
            head_hash=prev_hash if count else None,
            last_good_checkpoint=prev_cp_seq or None,
            last_published_seq=last_anchor or None,
            events_past_published=last_seq - last_anchor if anchors else None,
        )


def _checkpoint_problem(
    checkpoint: Checkpoint, head_hash: str, count: int, prev_seq: int, verifier: CheckpointVerifier | None
) -> str | None:
    if checkpoint.head_hash != head_hash:
        return "checkpoint_hash_mismatch"
    if checkpoint.event_count != count:
        return "checkpoint_count_mismatch"
    if checkpoint.prev_seq != prev_seq:
        return "checkpoint_sequence_broken"
    return verifier.check(checkpoint) if verifier is not None else None
