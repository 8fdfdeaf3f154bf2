"""The worker is killed (kill -9) in the middle of a conversation, and the conversation still completes with
nothing stored twice.

The test holds PostgreSQL's audit lock (tests/chaos/test_audit_kill.py's `AuditLock`), so the first
candidate's commit waits exactly where its effect meets its audit event, after extraction and with every
later candidate still to come. Then `memwarden worker` is killed, a new one starts, the lock is released:
Temporal replays ConversationWorkflow on the new worker, the child RememberWorkflow retries its attempt,
and the API's answer lists every candidate once. Afterwards each memory is one row, each state change one
audit event, the parked conversation is gone and the chain verifies. Sending it again changes nothing.

All real: the Temporal dev server, `memwarden worker` as a child process, PostgreSQL, the API under uvicorn
in this process (no worker beside it). Every text is synthetic.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from tests.chaos.test_audit_kill import WAIT_S, AuditLock, Stack, src, stack, tenant

pytestmark = [pytest.mark.postgres]
__all__ = ["src", "stack"]  # the module's fixtures, shared with test_audit_kill

MESSAGES = [
    {"role": "user", "content": "synthetic: I live in Tealtown and I love kite flying.", "turn_id": "u1"},
    {"role": "assistant", "content": "synthetic: noted, how can I help?", "turn_id": "a1"},
    {"role": "user", "content": "synthetic: actually, I moved to Ambertown last month.", "turn_id": "u2"},
    {"role": "user", "content": "synthetic: for this ticket, keep the reply very short.", "turn_id": "u3"},
]


async def test_a_worker_killed_mid_conversation_leaves_every_candidate_stored_once(stack: Stack) -> None:
    t = tenant()
    alice = stack.auth(t, "alice")
    body = {"session_id": "s-kill", "messages": MESSAGES}
    async with AuditLock(stack.settings.database_url or "") as lock:
        sending = asyncio.create_task(stack.post("/v1/conversations", alice, body))
        await lock.waiter(sending)
        # Extraction is done and the first candidate's commit is waiting: nothing of it shows yet.
        events, _ = await stack.store.list_audit(t, limit=50, cursor=None, oldest_first=True)
        assert [e.operation for e in events if e.operation in ("create", "update")] == []
        stack.worker.kill()  # kill -9 of the process group
        stack.start_worker()
        await lock.release()
        answer = await asyncio.wait_for(sending, WAIT_S * 2)

    assert answer["status"] == "done"
    got = [(c["message_index"], c["kind"], c["decision"]) for c in answer["candidates"]]
    assert got == [
        (0, "fact", "ADD"),
        (0, "preference", "ADD"),
        (2, "fact", "UPDATE"),
        (3, "task_guidance", "ADD"),
    ], got
    ids = [c["memory_id"] for c in answer["candidates"]]
    assert len(set(ids)) == len(ids)
    rows = await stack.store.get_many(t, ids)
    assert set(rows) == set(ids), "every candidate is one row"
    events, _ = await stack.store.list_audit(t, limit=200, cursor=None, oldest_first=True)
    changes = Counter(e.memory_id for e in events if e.operation in ("create", "update"))
    assert changes == Counter(ids), f"one state-change event per memory: {changes}"
    # The conversation's claim check is named as its workflow is (memwarden.services.conversations).
    assert await stack.store.get_candidate(answer["workflow_id"]) is None, "the parked conversation was released"

    again = await stack.post("/v1/conversations", alice, body)
    assert again == answer, "the same conversation is the same answer"
    events_after, _ = await stack.store.list_audit(t, limit=200, cursor=None, oldest_first=True)
    assert len(events_after) == len(events), "sending it again changed nothing"
    verified = await stack.verify(t)
    assert verified["ok"] is True and verified["broken_seq"] is None, verified
    await stack.worker_ready()
