"""Claim checks: content in flight parked by reference, so workflow payloads and history carry only `ref`.

The API parks the content (a candidate, a search query) and hands the workflow its ref; the activity
reads it back, and the transaction that records the outcome drops it. What no workflow came back for is
swept after its `expires_at`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from memwarden.stores.sql import statements as Q
from memwarden.stores.sql.engine import SqlEngine
from memwarden.stores.sql.rows import _utcnow
from memwarden.stores.sql_models import candidates


class ClaimChecks(SqlEngine):
    """Reads and writes of `candidates`, and the one-statement read that screening starts with."""

    async def put_candidate(self, ref: str, tenant_id: str, content: str, expires_at: datetime) -> None:
        """Park content in flight so workflow payloads carry only `ref`; re-putting a ref replaces it."""
        await self.put_candidates([(ref, tenant_id, content, expires_at)])

    async def put_candidates(self, rows: Sequence[tuple[str, str, str, datetime]]) -> None:
        """`put_candidate` for several (ref, tenant, content, expires_at) in one transaction (one fsync):
        a write parks its content and its subject handle together."""
        upsert = Q.upsert_candidate(self.dialect)

        def park(conn: Connection) -> None:
            for ref, tenant_id, content, expires_at in rows:
                params = {
                    "ref": ref,
                    "tenant_id": tenant_id,
                    "content": content,
                    "created_at": _utcnow(),
                    "expires_at": expires_at,
                }
                if conn.execute(upsert, params).rowcount != 1:
                    raise ValueError(f"candidate ref {ref} belongs to another tenant")

        await self._transact(park)

    async def get_candidate(self, ref: str) -> str | None:
        """The parked content, or None when absent or past its `expires_at`."""
        async with self._read(single_statement=True) as conn:
            return await conn.scalar(Q.CANDIDATE_CONTENT, {"ref": ref, "now": _utcnow()})

    async def get_candidates(self, refs: Sequence[str]) -> dict[str, str]:
        """`get_candidate` for several refs in one statement (a search's query and its subject handle):
        the refs found and not expired, with their content."""
        c = candidates.c
        stmt = sa.select(c.ref, c.content).where(c.ref.in_(list(refs)), c.expires_at > _utcnow())
        return await self._query(
            lambda conn: {ref: content for ref, content in conn.execute(stmt)}, single_statement=True
        )

    async def delete_candidate(self, ref: str) -> None:
        """Drop parked content once it is committed or rejected (idempotent)."""
        await self._transact(lambda conn: conn.execute(Q.DELETE_CANDIDATE, {"ref": ref}))

    async def delete_expired_candidates(self, now: datetime) -> int:
        """Sweep parked content whose workflow never came back for it; returns how many went."""
        async with self._write() as conn:
            result = await conn.execute(sa.delete(candidates).where(candidates.c.expires_at <= now))
            return result.rowcount

    async def screen_inputs(
        self, tenant_id: str, owner_id: str, ref: str, source: tuple[str, str] | None
    ) -> tuple[bool, str | None, bool]:
        """What screening reads before anything else, in one statement: (memory on for the owner, the parked
        content or None, whether the cited source record `(system, key)` is quarantined)."""
        params: dict[str, Any] = {"tenant_id": tenant_id, "owner_id": owner_id, "ref": ref, "now": _utcnow()}
        stmt = Q.SCREEN_INPUTS
        if source is not None:
            stmt = Q.SCREEN_INPUTS_WITH_SOURCE
            params |= {"system": source[0], "key": source[1]}
        enabled, content, is_quarantined = await self._query(
            lambda conn: tuple(conn.execute(stmt, params).one()), single_statement=True
        )
        return (True if enabled is None else bool(enabled)), content, bool(is_quarantined)
