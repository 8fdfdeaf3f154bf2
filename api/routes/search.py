"""`POST /v1/search`: the workflow picks ids under the caller's filter; content is loaded here."""

from __future__ import annotations

import contextlib
import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Body
from temporalio.client import WorkflowFailureError

from api.problems import Problem
from api.schemas import SearchIn, SearchOut, SearchResultOut
from api.state import ApiState, Caller, State
from api.telemetry import traced
from memwarden.identity import Principal, Role, read_filter
from memwarden.policy.freshness import read_freshness
from memwarden.policy.render import context_block, label
from memwarden.records import MemoryRecord, ReadFilter, RetrieveInput, RetrieveResult, Sensitivity, Status
from memwarden.stores.audit import AuditEventIn, read_event
from memwarden.stores.subjects import handle_row, new_handle
from memwarden.telemetry import SEARCH_MEMORY
from workflows.retrieve import RetrieveWorkflow

router = APIRouter(prefix="/v1", tags=["search"])

QUERY_CLAIM_TTL = timedelta(minutes=5)
"""A parked query outlives its workflow only if the API dies mid-search; the candidate sweep drops it."""


@router.post("/search", response_model=SearchOut)
@traced(SEARCH_MEMORY)
async def search(state: State, caller: Caller, body: Annotated[SearchIn, Body()]) -> SearchOut:
    settings = state.settings
    if len(body.query) > settings.max_query_chars:
        raise Problem(413, "query_too_large", f"query exceeds {settings.max_query_chars} characters", field="query")
    k = body.k or settings.default_k
    if k > settings.max_k:
        raise Problem(422, "validation_failed", f"k is at most {settings.max_k}", field="k")
    if caller.role not in (Role.USER, Role.AGENT):
        raise Problem(403, "forbidden_role", f"role {caller.role.value} cannot search memory content")
    rf = read_filter(
        caller,
        types=tuple(dict.fromkeys(body.types)) if body.types else None,
        max_sensitivity=body.max_sensitivity or Sensitivity.RESTRICTED,
    )
    workflow_id = f"retrieve-{uuid.uuid4()}"
    if not rf.clauses:
        return SearchOut(results=[], withheld=[], context="", workflow_id=workflow_id)
    query_ref = f"query-{workflow_id}"
    result = await _run_workflow(state, caller, body, rf, k, workflow_id, query_ref)
    now = datetime.now(UTC)
    scores = {h.memory_id: h.score for h in result.hits}
    # Read-time revalidation's verdicts (verified / unverified) replace the store's fresh-or-stale; a memory
    # the store now holds stale changed at its source during this read: held back, never served as current.
    checked = {c.memory_id: c.freshness for c in result.checks}
    seen = {c.memory_id: c.version for c in result.checks}

    def settle(found: list[MemoryRecord]) -> tuple[list[MemoryRecord], list[dict[str, Any]]]:
        """What is served and what is held back, from the rows this answer's transaction read."""
        records = sorted(found, key=lambda r: -scores[r.id])
        changed = [
            r for r in records if r.id in checked and r.status is Status.STALE and seen[r.id] not in (None, r.version)
        ]
        held = [*result.withheld, *({"memory_id": r.id, "reason": "stale"} for r in changed)]
        return [r for r in records if r not in changed], held

    def audit(found: list[MemoryRecord]) -> AuditEventIn:
        served, held = settle(found)
        return read_event(
            tenant_id=caller.tenant,
            actor=caller.actor,
            workflow_id=workflow_id,
            returned=[r.id for r in served],
            withheld=held,
            consequence=body.consequence.value,
            agent=caller.agent if caller.role is Role.AGENT else None,
            session=body.session,
        )

    # Claim check: content is loaded only for ids that are still eligible right now; in the same
    # transaction the read is audited (ids only: which memories this caller got and which were
    # held back) and the parked query dropped, so an answer never leaves without its audit row.
    try:
        loaded = await state.store.answer_search(
            rf,
            list(scores),
            now,
            audit,
            drop_candidate=query_ref,
            settings_owner=caller.subject_owner,
            served=lambda found: [r.id for r in settle(found)[0]],
        )
    except BaseException:
        with contextlib.suppress(Exception):  # the candidate sweep drops it otherwise
            await state.store.delete_candidate(query_ref)
        raise
    if loaded is None:  # memory switched off for the person served: reads return nothing
        return SearchOut(results=[], withheld=[], context="", workflow_id=workflow_id)
    records, withheld = settle(loaded)
    result = result.model_copy(update={"withheld": withheld})
    entries = [(r, checked.get(r.id) or read_freshness(r)) for r in records]
    results = [
        SearchResultOut(
            memory_id=r.id,
            content=r.content or "",
            type=r.type,
            slot=r.slot,
            score=scores[r.id],
            freshness=f,
            source_kind=r.source_kind,
            source_ref=r.source_ref,
            created_at=r.created_at,
            last_confirmed_at=r.last_confirmed_at,
            label=label(r, f),
        )
        for r, f in entries
    ]
    return SearchOut(
        results=results,
        withheld=[{"memory_id": w["memory_id"], "reason": w["reason"]} for w in result.withheld],
        context=context_block(entries),
        workflow_id=workflow_id,
    )


async def _run_workflow(
    state: ApiState, caller: Principal, body: SearchIn, rf: ReadFilter, k: int, workflow_id: str, query_ref: str
) -> RetrieveResult:
    """Park the query, then run RetrieveWorkflow; on failure the parked query is dropped here (on
    success the answer's transaction drops it).

    Claim check: the query (and, for a person, the read filter under a subject handle) is committed to
    the store before the workflow starts, so the activity always finds it there, on whichever worker it
    runs, and the query never enters history.
    """
    expires = datetime.now(UTC) + QUERY_CLAIM_TTL
    rows = [(query_ref, caller.tenant, body.query, expires)]
    sealed, handle = rf, None
    owner = caller.subject_owner
    if owner is not None:
        # The person this search is for stays out of history: the read filter waits under a handle.
        handle = new_handle(state.handle_key, caller.tenant, owner)
        rows.append(handle_row(handle, caller.tenant, {"read_filter": rf.model_dump(mode="json")}, expires))
        sealed = rf.model_copy(update={"clauses": ()})
    await state.store.put_candidates(rows)
    request = RetrieveInput(
        query_ref=query_ref,
        k=k,
        read_filter=sealed,
        consequence=body.consequence,
        actor=state.pseudonyms.actor(caller.tenant, caller.actor),
        subject_ref=handle,
    )
    try:
        return await state.temporal.execute_workflow(
            RetrieveWorkflow.run,
            request,
            id=workflow_id,
            task_queue=state.settings.temporal_task_queue,
            execution_timeout=timedelta(seconds=state.settings.workflow_timeout_seconds),
            request_eager_start=True,
        )
    except BaseException as exc:
        await state.store.delete_candidate(query_ref)
        if isinstance(exc, WorkflowFailureError):
            raise Problem(503, "search_failed", "search is unavailable", extra={"workflow_id": workflow_id}) from None
        raise
