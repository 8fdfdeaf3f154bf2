"""`POST /v1/events`: a system of record says one of its records changed or was deleted (CloudEvents 1.0).

Parsed with the `cloudevents` library (structured JSON, or binary mode with `ce-` headers). Only a
`system` principal, only for a source it speaks for (sources.toml `principals`, default the source's
own name). Before the 202, in one transaction, the dependent memories become `stale` (changed) or
`invalidated` (deleted), so none is served as current again; then one InvalidateWorkflow per (tenant,
source, record) is signalled-with-start, so a burst of events for one record coalesces. A malformed
event is a 422 naming the attribute at fault, and nothing changes.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

from cloudevents.core.bindings.http import HTTPMessage, from_http
from cloudevents.core.exceptions import BaseCloudEventException, CloudEventValidationError
from cloudevents.core.formats.json import JSONFormat
from cloudevents.core.v1.event import CloudEvent
from fastapi import APIRouter, Request
from pydantic import BaseModel
from temporalio.service import RPCError

from api.problems import Problem
from api.state import Caller, State
from api.telemetry import traced
from memwarden.identity import Role
from memwarden.records import InvalidateInput, MemoryRecord, SourceChange, SourceEvent, namespace_label
from memwarden.stores.audit import AuditEventIn, Operation
from memwarden.stores.revalidation import RevalidationStore
from memwarden.telemetry import REVALIDATE_MEMORY
from workflows.revalidate import SOURCE_EVENT_SIGNAL, InvalidateWorkflow

router = APIRouter(prefix="/v1", tags=["events"])

EVENT_TYPES = {
    "memwarden.source.changed": SourceChange.CHANGED,
    "memwarden.source.deleted": SourceChange.DELETED,
}
REQUIRED = ("specversion", "id", "source", "type")
MAX_ID = 256
MAX_KEY = 256
MAX_VERSION = 256


class EventAccepted(BaseModel):
    event_id: str
    workflow_id: str
    stale: int
    invalidated: int


def key_hash(tenant_id: str, system: str, key: str) -> str:
    """What identifies a source record in history and workflow ids: the key may name a person."""
    return hashlib.sha256(f"{tenant_id}\x00{system}\x00{key}".encode()).hexdigest()


def invalidate_workflow_id(tenant_id: str, system: str, key: str) -> str:
    return f"invalidate-{key_hash(tenant_id, system, key)[:40]}"


def _bad(field: str, detail: str) -> Problem:
    return Problem(422, "invalid_event", detail, field=field)


def _check_required(headers: dict[str, str], body: bytes) -> None:
    """The library fills in a missing `id`; the spec requires it, so required attributes are checked first."""
    if any(k.lower().startswith("ce-") for k in headers):
        present = {k.lower()[3:]: v for k, v in headers.items() if k.lower().startswith("ce-")}
    else:
        try:
            raw = json.loads(body)
        except (ValueError, RecursionError):  # nesting too deep for the parser is malformed too
            raise _bad("body", "the body is not JSON") from None
        if not isinstance(raw, dict):
            raise _bad("body", "a structured CloudEvent is a JSON object")
        present = raw
    for name in REQUIRED:
        value = present.get(name)
        if not isinstance(value, str) or not value.strip():
            raise _bad(name, f"the CloudEvents attribute {name} is required")
    when = present.get("time")
    if when is not None:
        try:
            datetime.fromisoformat(str(when).replace("Z", "+00:00"))
        except ValueError:
            raise _bad("time", "time must be an RFC 3339 timestamp") from None


def parse_event(headers: dict[str, str], body: bytes) -> tuple[CloudEvent, SourceChange, str, str | None]:
    """The event, its change kind, the record key (subject) and the announced version; 422 naming the field."""
    _check_required(headers, body)
    message = HTTPMessage(headers={k.lower(): v for k, v in headers.items()}, body=body)
    try:
        event = from_http(message, JSONFormat(), CloudEvent)
    except CloudEventValidationError as exc:
        field = next(iter(exc.errors), "body")
        raise _bad(str(field), f"the CloudEvents attribute {field} is invalid") from None
    except (BaseCloudEventException, ValueError, TypeError, KeyError, RecursionError):
        raise _bad("body", "not a CloudEvents 1.0 event") from None
    if not isinstance(event, CloudEvent):
        raise _bad("specversion", "only CloudEvents 1.0 is accepted")
    change = EVENT_TYPES.get(event.get_type())
    if change is None:
        raise _bad("type", f"type must be one of {sorted(EVENT_TYPES)}")
    if len(event.get_id()) > MAX_ID:
        raise _bad("id", f"id is at most {MAX_ID} characters")
    subject = event.get_subject()
    if not isinstance(subject, str) or not subject.strip() or len(subject) > MAX_KEY:
        raise _bad("subject", f"subject (the record key) is required, at most {MAX_KEY} characters")
    data: Any = event.get_data()
    if data is not None and not isinstance(data, dict):
        raise _bad("data", "data must be a JSON object")
    version = (data or {}).get("version")
    if version is not None and (not isinstance(version, str) or not version or len(version) > MAX_VERSION):
        raise _bad("data.version", f"data.version must be a string of 1 to {MAX_VERSION} characters")
    return event, change, subject, version


@router.post("/events", status_code=202, response_model=EventAccepted)
@traced(REVALIDATE_MEMORY)
async def post_event(request: Request, state: State, caller: Caller) -> EventAccepted:
    if caller.role is not Role.SYSTEM:
        raise Problem(403, "forbidden_role", f"role {caller.role.value} may not post source events")
    body = await request.body()
    event, change, key, version = parse_event(dict(request.headers), body)
    system = event.get_source()
    config = state.sources.config(system) if state.sources is not None else None
    if config is None or not config.owned_by(caller.sub):
        raise Problem(403, "forbidden_source", "this principal may post events only for its own source")
    now = datetime.now(UTC)
    workflow_id = invalidate_workflow_id(caller.tenant, system, key)

    def audit(record: MemoryRecord) -> AuditEventIn:
        return AuditEventIn(
            id=hashlib.sha256(f"event\x00{system}\x00{event.get_id()}\x00{record.id}".encode()).hexdigest()[:64],
            at=now,
            tenant_id=caller.tenant,
            actor=caller.actor,
            operation=Operation.REVALIDATE,
            memory_id=record.id,
            namespace=namespace_label(record),
            reason="source_changed" if change is SourceChange.CHANGED else "source_deleted",
            workflow_id=workflow_id,
            hash_before=record.content_hash or None,
            details={
                "trigger": "event",
                "source": system,
                "event_id": event.get_id()[:MAX_ID],
                "status": record.status.value,
            },
        )

    store = RevalidationStore(state.store)
    moved = await store.mark_for_event(caller.tenant, system, key, change, now, audit)
    # Every dependent stale now, not only those this event moved: a repeat after a failed start still counts.
    ids = await store.stale_dependents(caller.tenant, system, key) if change is SourceChange.CHANGED else moved
    signal = SourceEvent(event_id=event.get_id(), change=change, version=version, memory_ids=ids)
    settings = state.settings
    try:
        await state.temporal.start_workflow(
            InvalidateWorkflow.run,
            args=[
                InvalidateInput(tenant_id=caller.tenant, system=system, key_hash=key_hash(caller.tenant, system, key)),
                settings.invalidate_coalesce_seconds,
                settings.invalidate_quiet_seconds,
                settings.revalidation_background_attempts,
            ],
            id=workflow_id,
            task_queue=settings.temporal_task_queue,
            start_signal=SOURCE_EVENT_SIGNAL,
            start_signal_args=[signal],
        )
    except RPCError:
        # The marks stand (nothing stale is served as current); posting the event again revalidates.
        raise Problem(
            503, "events_unavailable", "revalidation could not be started", extra={"workflow_id": workflow_id}
        ) from None
    stale = len(moved) if change is SourceChange.CHANGED else 0
    return EventAccepted(event_id=event.get_id(), workflow_id=workflow_id, stale=stale, invalidated=len(moved) - stale)
