"""Blast radius: who retrieved a memory, when, and in how many searches, answered from the audit log.

Every answered search appends one `read` event in the answer's own transaction (`answer_search`),
listing the ids it returned, the agent that asked (an agent's id is a service's, never a person's)
and the conversation session the request named. So the audit log, which no one can rewrite
unnoticed, already knows which agents and sessions a bad memory reached; this module only asks it.
No content is read: ids, pseudonymous actors, times and counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from memwarden.stores.sql import SqlStore
from memwarden.stores.sql_models import audit_events

_CONTAINS = {
    "sqlite": "EXISTS (SELECT 1 FROM json_each(audit_events.details, '$.returned') AS j WHERE j.value IN :ids)",
    "postgresql": (
        "EXISTS (SELECT 1 FROM json_array_elements_text(audit_events.details -> 'returned') AS j(v) WHERE j.v IN :ids)"
    ),
}
"""A read event returned one of `ids`: the JSON array's elements, in each dialect's own words."""


@dataclass
class ReadHistory:
    """What the read events returning some memories say about who was answered with them."""

    searches: int = 0
    first_at: datetime | None = None
    last_at: datetime | None = None
    actors: dict[str, int] = field(default_factory=dict)
    agents: dict[str, int] = field(default_factory=dict)
    sessions: dict[str, int] = field(default_factory=dict)
    workflows: set[str] = field(default_factory=set)
    high_consequence: int = 0

    def view(self) -> dict[str, Any]:
        return {
            "searches": self.searches,
            "first_at": self.first_at.isoformat() if self.first_at else None,
            "last_at": self.last_at.isoformat() if self.last_at else None,
            "high_consequence": self.high_consequence,
            "actors": [{"actor": a, "searches": n} for a, n in sorted(self.actors.items())],
            "agents": [{"agent_id": a, "searches": n} for a, n in sorted(self.agents.items())],
            "sessions": [{"session": s, "searches": n} for s, n in sorted(self.sessions.items())],
        }


async def read_history(store: SqlStore, tenant_id: str, memory_ids: Sequence[str]) -> ReadHistory:
    """Every search of this tenant that returned any of `memory_ids` (each search counted once)."""
    history = ReadHistory()
    ids = sorted(set(memory_ids))
    if not ids:
        return history
    a = audit_events.c
    contains = sa.text(_CONTAINS[store.dialect]).bindparams(sa.bindparam("ids", expanding=True))
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        stmt = (
            sa.select(a.at, a.actor, a.workflow_id, a.details)
            .where(a.tenant_id == tenant_id, a.operation == "read", contains)
            .order_by(a.seq)
        )
        async with store.engine.connect() as conn:
            rows = (await conn.execute(stmt, {"ids": chunk})).all()
        for at, actor, workflow_id, details in rows:
            if workflow_id in history.workflows:  # a search returning several members is one search
                continue
            history.workflows.add(workflow_id)
            history.searches += 1
            history.first_at = at if history.first_at is None or at < history.first_at else history.first_at
            history.last_at = at if history.last_at is None or at > history.last_at else history.last_at
            history.actors[actor] = history.actors.get(actor, 0) + 1
            agent = (details or {}).get("agent")
            if agent:
                history.agents[str(agent)] = history.agents.get(str(agent), 0) + 1
            session = (details or {}).get("session")
            if session:
                history.sessions[str(session)] = history.sessions.get(str(session), 0) + 1
            if (details or {}).get("consequence") == "high":
                history.high_consequence += 1
    return history
