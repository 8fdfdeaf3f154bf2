"""Screen a proposal before anything is parked: rejected text never reaches the database or its WAL.

Why here and not only in the activity: the claim check is a row in the durable store, so parking a
candidate writes its text into the database file and its write-ahead log (and a PostgreSQL heap)
before the gate has looked at it. A secret the gate then rejects would be on disk all the same, in
pages a file scan can read. So the API runs the detectors and the gate's first steps (`precheck`:
the memory switch, source trust, never-store, importance) before it parks anything; a candidate
they reject is answered and audited here, and no workflow runs.

The activity stays the judge of everything that passes: the API hands it the screening it made
(codes only, safe for history) so the detectors do not run twice, and the activity reuses it only
for the content whose hash the input names, then decides with the whole gate.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import uuid

from api.problems import Problem
from api.state import ApiState
from memwarden import detect
from memwarden.keys import Purpose
from memwarden.policy.gate import GateDecision, GateReason, Screened, precheck
from memwarden.records import Decision, RememberInput, RememberResult, Screening, namespace_label
from memwarden.stores.audit import AuditEventIn

_DENY_NS = uuid.UUID("6c1f7e0a-3b52-4f9d-8a61-0e2d4b7c9f13")


def deny_event_id(memory_id: str) -> str:
    """One event per rejected memory id: a keyed write proposed again is recorded once."""
    return f"deny-{uuid.uuid5(_DENY_NS, memory_id)}"


async def prescreen(state: ApiState, request: RememberInput, content: str) -> tuple[Screening, GateDecision | None]:
    """The detectors' codes for `content` and the gate's steps 1-4 over them: a REJECT, or None to go on.

    `request` is the unsealed input (the real owner and writer): the detectors read every free-text
    field, as the activity does. A detector that fails is a 503 with nothing stored (fail closed).
    """
    ref = request.source_ref
    # The owner's switch and the source's quarantine are read while the detectors run (both off the loop).
    inputs = asyncio.ensure_future(
        state.store.screen_inputs(
            request.tenant_id, request.owner_id, request.candidate_ref, (ref.system, ref.key) if ref else None
        )
    )
    try:
        screening = await detect.screen_async(
            content, source_kind=request.source_kind, fields=detect.free_text_fields(request)
        )
    except BaseException as exc:
        inputs.cancel()
        if isinstance(exc, detect.DetectionError):
            raise Problem(503, "remember_failed", "the write could not be screened; nothing was stored") from None
        raise
    enabled, _, quarantined = await inputs
    screened = Screened(screening=screening, memory_enabled=enabled, source_quarantined=quarantined)
    return screening, precheck(screened.gate_input(request), state.settings.gate_policy)


def request_binding(state: ApiState, request: RememberInput) -> str:
    """HMAC of (memory id, content hash) under the request-binding key: the same keyed write gives the
    same value, other content under the same key another; without the service's secret it names nothing."""
    key = state.settings.key_for(Purpose.REQUEST_BINDINGS)
    return hmac.new(key, f"{request.memory_id}\x00{request.content_hash}".encode(), hashlib.sha256).hexdigest()


async def rejected_before(state: ApiState, request: RememberInput) -> RememberResult | None:
    """The answer a keyed write got when the API rejected it before parking, or None if it never was.

    Raises `KeyReused` when the key was rejected for other content (the caller answers 409).
    """
    event = await state.store.get_audit_event(deny_event_id(request.memory_id))
    if event is None or event.reason is None:
        return None
    if event.details.get("request_binding") != request_binding(state, request):
        raise KeyReused(request.memory_id)
    return RememberResult(decision=Decision.REJECT, reason=event.reason)


async def withheld_reason(content: str, source_kind: str) -> str | None:
    """Why one conversation message may not be parked at all (a secret, a detector past its deadline), or None.

    Only what the gate rejects whatever else it finds: a message with PII or an instruction is parked,
    and the extractor and the gate decide what of it becomes memory, as for any candidate."""
    try:
        screening = await detect.screen_async(content, source_kind=source_kind)
    except detect.DetectionError:
        raise Problem(503, "remember_failed", "the conversation could not be screened; nothing was stored") from None
    if screening.deadline_exceeded:
        return GateReason.DETECTOR_DEADLINE.value
    if screening.secrets:
        return GateReason.SECRET_DETECTED.value
    return None


class KeyReused(ValueError):
    """An idempotency key proposed again with other content than it was first rejected for."""


async def record_rejection(state: ApiState, request: RememberInput, rejected: GateDecision) -> RememberResult:
    """The rejection's audit event (as the activity records one: no content hash, no memory id) and answer.

    A keyed write's event also holds its `request_binding`, so the key proposed again with other content
    is refused as reused (as it was when a workflow's memo held the plain content hash)."""
    binding = {"request_binding": request_binding(state, request)} if request.idempotency_key else {}
    await state.store.append_audit(
        AuditEventIn(
            id=deny_event_id(request.memory_id),
            tenant_id=request.tenant_id,
            actor=request.actor,
            operation="deny",
            memory_id=None,
            namespace=namespace_label(request),
            reason=rejected.reason.value,
            details={"type": request.type.value, "decision": Decision.REJECT.value, "screened_by": "api", **binding},
        )
    )
    return RememberResult(decision=Decision.REJECT, reason=rejected.reason.value)
