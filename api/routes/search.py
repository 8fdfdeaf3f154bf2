"""`POST /v1/search`: the workflow picks ids under the caller's filter; content is loaded here."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Body
from temporalio.client import WorkflowFailureError

from api.problems import Problem
from api.routes.settings import memory_enabled
from api.schemas import SearchIn, SearchOut, SearchResultOut
from api.state import Caller, State
from api.telemetry import traced
from memwarden.identity import Role, read_filter
from memwarden.policy.freshness import read_freshness
from memwarden.policy.render import context_block, label
from memwarden.records import RetrieveInput, Sensitivity, Status
from memwarden.stores.audit import read_event
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
    if not rf.clauses or not await memory_enabled(state, caller):
        return SearchOut(results=[], withheld=[], context="", workflow_id=workflow_id)
    # Claim check: the query is parked in the store for the activity, so it never enters history.
    query_ref = f"query-{workflow_id}"
    await state.store.put_candidate(query_ref, caller.tenant, body.query, datetime.now(UTC) + QUERY_CLAIM_TTL)
    request = RetrieveInput(query_ref=query_ref, k=k, read_filter=rf, consequence=body.consequence, actor=caller.actor)
    try:
        result = await state.temporal.execute_workflow(
            RetrieveWorkflow.run,
            request,
            id=workflow_id,
            task_queue=settings.temporal_task_queue,
            execution_timeout=timedelta(seconds=settings.workflow_timeout_seconds),
            request_eager_start=True,
        )
    except WorkflowFailureError:
        raise Problem(503, "search_failed", "search is unavailable", extra={"workflow_id": workflow_id}) from None
    finally:
        await state.store.delete_candidate(query_ref)
    now = datetime.now(UTC)
    scores = {h.memory_id: h.score for h in result.hits}
    # Claim check: content is loaded only for ids that are still eligible right now.
    records = sorted(await state.store.eligible(rf, list(scores), now), key=lambda r: -scores[r.id])
    # Read-time revalidation's verdicts (verified / unverified) replace the store's fresh-or-stale; a memory
    # the store now holds stale changed at its source during this read: held back, never served as current.
    checked = {c.memory_id: c.freshness for c in result.checks}
    seen = {c.memory_id: c.version for c in result.checks}
    changed = [
        r for r in records if r.id in checked and r.status is Status.STALE and seen[r.id] not in (None, r.version)
    ]
    if changed:
        records = [r for r in records if r not in changed]
        result = result.model_copy(
            update={"withheld": [*result.withheld, *({"memory_id": r.id, "reason": "stale"} for r in changed)]}
        )
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
    # Audited before answering, ids only: which memories this caller got and which were held back.
    await state.store.append_audit(
        read_event(
            tenant_id=caller.tenant,
            actor=caller.actor,
            workflow_id=workflow_id,
            returned=[r.id for r in records],
            withheld=result.withheld,
            consequence=body.consequence.value,
        )
    )
    if records and state.usage is not None:
        state.usage.record(caller.tenant, [r.id for r in records], now)  # written later, in a batch
    return SearchOut(
        results=results,
        withheld=[{"memory_id": w["memory_id"], "reason": w["reason"]} for w in result.withheld],
        context=context_block(entries),
        workflow_id=workflow_id,
    )
