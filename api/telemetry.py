"""Telemetry at the API edge: one decorator per memory route, and the Prometheus endpoint.

`@traced(CREATE_MEMORY)` opens the operation's span around the route (so the Temporal client's
StartWorkflow span, and through its headers the workflow and activity spans, become its
children), names the caller by tenant, role and agent, and when the route answers, reads ids,
decision, reason and counts off the response model: never a field that holds content. Problems
mark the span failed with their code, and a 403 counts as a denial (a metric and an audit event).
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

from fastapi import APIRouter
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from api.problems import Problem
from api.state import ApiState
from memwarden import telemetry
from memwarden.identity import Principal
from memwarden.stores.audit import AuditEventIn, Operation

P = ParamSpec("P")
R = TypeVar("R")


def _result_attributes(result: Any) -> dict[str, Any]:
    """Ids, codes and counts from a response model (RememberOut, SearchOut, receipts, ...)."""
    attrs: dict[str, Any] = {}
    for name, key in (
        ("decision", telemetry.DECISION),
        ("reason", telemetry.REASON),
        ("memory_id", telemetry.GEN_AI_MEMORY_RECORD_ID),
        ("workflow_id", telemetry.WORKFLOW_ID),
        ("supersedes", telemetry.SUPERSEDES),
        ("deletion_id", telemetry.DELETION_ID),
    ):
        value = getattr(result, name, None)
        if value is not None:
            attrs[key] = str(getattr(value, "value", value))
    results = getattr(result, "results", None)
    if isinstance(results, list):
        attrs[telemetry.GEN_AI_MEMORY_RECORD_COUNT] = len(results)
        attrs[telemetry.STALE_COUNT] = sum(1 for r in results if str(getattr(r, "freshness", "")) == "stale")
    candidates = getattr(result, "candidates", None)
    if isinstance(candidates, list):
        attrs[telemetry.CANDIDATE_COUNT] = len(candidates)
        attrs[telemetry.STORED_COUNT] = sum(1 for c in candidates if str(c.decision) in ("ADD", "UPDATE"))
        if getattr(result, "extractor", None):
            attrs[telemetry.EXTRACTOR] = str(result.extractor)
    withheld = getattr(result, "withheld", None)
    if isinstance(withheld, list):
        attrs[telemetry.WITHHELD_COUNT] = len(withheld)
    return attrs


def _record_metrics(operation: str, result: Any) -> None:
    m = telemetry.metrics()
    if operation in (telemetry.CREATE_MEMORY, telemetry.UPDATE_MEMORY):
        decision, reason = getattr(result, "decision", None), getattr(result, "reason", None)
        if decision is not None and reason is not None:
            m.record_write(str(getattr(decision, "value", decision)), str(reason))
    elif operation == telemetry.REMEMBER_CONVERSATION and getattr(result, "extractor", None):
        m.record_conversation(str(result.extractor), [(str(c.decision), c.kind) for c in result.candidates])
    elif operation == telemetry.SEARCH_MEMORY:
        freshness = [str(getattr(r.freshness, "value", r.freshness)) for r in getattr(result, "results", [])]
        withheld = [str(w.get("reason") if isinstance(w, dict) else w.reason) for w in getattr(result, "withheld", [])]
        m.record_search(freshness, withheld)


async def _audit_denial(state: Any, principal: Principal | None, operation: str, code: str) -> None:
    """A refused request is an audit event too (operation `deny`, the reason code, no input)."""
    if principal is None or not isinstance(state, ApiState):
        return
    await state.store.append_audit(
        AuditEventIn(
            tenant_id=principal.tenant,
            actor=principal.actor,
            operation=Operation.DENY,
            reason=code,
            details={"attempted": operation},
        )
    )


def traced(operation: str) -> Callable[[Callable[P, Awaitable[R]]], Callable[P, Awaitable[R]]]:
    """Wrap a route in its operation span; the route keeps its signature (FastAPI reads __wrapped__)."""

    def decorate(route: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
        @functools.wraps(route)
        async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            caller = kwargs.get("caller")
            principal = caller if isinstance(caller, Principal) else None
            with telemetry.operation_span(
                operation,
                tenant=principal.tenant if principal else None,
                role=principal.role.value if principal else None,
                agent=principal.agent if principal else None,
            ) as span:
                try:
                    result = await route(*args, **kwargs)
                except Problem as problem:
                    telemetry.mark_error(span, problem.code)
                    if problem.status == 403:
                        telemetry.metrics().record_denial(problem.code, operation)
                        await _audit_denial(kwargs.get("state"), principal, operation, problem.code)
                    raise
                telemetry.set_attributes(span, _result_attributes(result))
                _record_metrics(operation, result)
                return result

        return wrapper

    return decorate


metrics_router = APIRouter(tags=["health"])


@metrics_router.get("/metrics", include_in_schema=False)
async def prometheus_metrics() -> Response:
    """Prometheus text exposition of memwarden's metrics (no content, no ids: codes and counts)."""
    body = generate_latest(telemetry.metrics().registry)
    return Response(content=body, media_type=CONTENT_TYPE_LATEST)
