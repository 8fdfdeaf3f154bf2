"""Bulk import over HTTP: create an import, upload its NDJSON lines in chunks, start it, watch it.

`POST /v1/imports {sha256, total_lines}` names the import after the caller and the file's hash, so the
same file from the same principal is the same import (a second run applies nothing twice, and an
interrupted upload resumes). `PUT /v1/imports/{id}/lines?first_line=N` takes a chunk of NDJSON lines
(each chunk within the request body limit): every line is admitted here exactly as `POST /v1/memories`
admits a body (`memories.admit`: field rules, the source kind the token may declare, the write target,
the source_ref) and screened before it is parked, as `POST /v1/memories` screens (`api.prescreen`): a line
the gate's first steps reject is decided REJECT on its line and audited, and its text is never written
anywhere; the rest are parked in the store with their screening, or refused on their line. A
conversation line (`{"session_id", "messages"}`) is admitted as `POST /v1/conversations` admits its body
(`conversations.admit_conversation`) and its messages holding a secret are withheld as that route withholds
them (`conversations.withhold`) before the rest is parked for its ConversationWorkflow. `POST
/v1/imports/{id}/start` starts ImportWorkflow, whose input is the import's id and position: no line's
content enters history. `GET /v1/imports/{id}` answers counts by decision, the position, and the lines
not applied by number with their reason codes, never their text; only the principal that started the
import, and the tenant's operators, may read it.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request
from pydantic import BaseModel, Field, ValidationError
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError

from api.input_guard import MAX_DEPTH, _strings, control_character, json_depth_exceeds
from api.prescreen import prescreen, record_rejection
from api.problems import Problem
from api.routes.conversations import admit_conversation, withhold
from api.routes.memories import _memory_id, admit
from api.schemas import ConversationIn
from api.state import ApiState, Caller, State
from memwarden.extract.base import Message
from memwarden.forget import subject_hash
from memwarden.identity import Principal, Role
from memwarden.policy.imports import DECISIONS, ImportInput
from memwarden.records import CandidateIn, RememberInput
from memwarden.services.conversations import ConversationTarget, ImportedConversation
from memwarden.stores.sql.imports import CANDIDATE, CONVERSATION, ImportRow, LineOutcome, ParkedLine
from workflows.imports import ImportWorkflow, import_workflow_id

router = APIRouter(prefix="/v1/imports", tags=["imports"])

_IMPORT_NS = uuid.UUID("2d0f8a61-7c3b-4e1a-9f52-3b8e6d4c1a07")
_LINE_NS = uuid.UUID("9a4e2c17-5b6d-4f80-8e3a-1c7d9b2f6e54")
WRITERS = (Role.USER, Role.AGENT, Role.SYSTEM)
READERS = (Role.OPERATOR, Role.PRIVACY)
NDJSON = "application/x-ndjson"


class ImportCreate(BaseModel):
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="The file's SHA-256 (names the import).")
    total_lines: int = Field(ge=1, description="How many lines the file has.")


class LineError(BaseModel):
    line: int
    decision: str
    reason: str
    field: str | None = None


class ImportOut(BaseModel):
    import_id: str
    status: str
    total_lines: int
    received_lines: int
    done_lines: int
    position: int
    """The lowest line number not yet decided (total_lines + 1 when every line is)."""
    counts: dict[str, int]
    errors: list[LineError]
    next_errors_after: int | None
    workflow_id: str | None
    created_at: datetime
    started_at: datetime | None
    completed_at: datetime | None
    line_max_bytes: int
    request_max_bytes: int


class ChunkOut(BaseModel):
    import_id: str
    received: int
    """Lines of this chunk new to the import (a re-sent chunk adds none)."""
    errors: list[LineError]
    next_line: int


def _may_write(caller: Principal) -> None:
    if caller.role not in WRITERS:
        raise Problem(403, "role_cannot_write", f"role {caller.role.value} cannot import memories")


async def _own_import(state: ApiState, caller: Principal, import_id: str, *, read: bool = False) -> ImportRow:
    """The import if this caller started it (or, to read it, is the tenant's operator); else 404."""
    row = await state.store.get_import(caller.tenant, import_id)
    mine = row is not None and row.actor_hash == state.pseudonyms.actor(caller.tenant, caller.actor)
    if row is None or not (mine or (read and caller.role in READERS)):
        raise Problem(404, "not_found", "no such import", field="import_id")
    return row


@router.post("", response_model=ImportOut, status_code=201)
async def create_import(state: State, caller: Caller, body: Annotated[ImportCreate, Body()]) -> ImportOut:
    _may_write(caller)
    if body.total_lines > state.settings.import_max_lines:
        raise Problem(
            413,
            "import_too_large",
            f"an import has at most {state.settings.import_max_lines} lines",
            field="total_lines",
        )
    actor_hash = state.pseudonyms.actor(caller.tenant, caller.actor)
    import_id = str(uuid.uuid5(_IMPORT_NS, f"{caller.tenant}\x00{caller.actor}\x00{body.sha256}\x00{body.total_lines}"))
    row = await state.store.create_import(
        ImportRow(
            id=import_id,
            tenant_id=caller.tenant,
            actor_hash=actor_hash,
            file_sha256=body.sha256,
            total_lines=body.total_lines,
            status="uploading",
            workflow_id=None,
            created_at=datetime.now(UTC),
            started_at=None,
            completed_at=None,
        )
    )
    return await _answer(state, row, errors_after=0, limit=100)


@router.put("/{import_id}/lines", response_model=ChunkOut)
async def upload_lines(
    state: State,
    caller: Caller,
    import_id: str,
    request: Request,
    first_line: Annotated[int, Query(ge=1)],
) -> ChunkOut:
    """A chunk of the file's lines, from line `first_line`: each admitted and parked, or refused on its line."""
    _may_write(caller)
    row = await _own_import(state, caller, import_id)
    content_type = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if content_type != NDJSON:
        raise Problem(415, "unsupported_media_type", f"lines are sent as {NDJSON}", field="body")
    if row.status != "uploading":
        raise Problem(409, "import_started", "this import has started; its lines can no longer change")
    raw = (await request.body()).split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()  # the chunk's final newline ends its last line
    last = first_line + len(raw) - 1
    if last > row.total_lines:
        raise Problem(422, "validation_failed", f"the import has {row.total_lines} lines", field="first_line")
    parked: list[ParkedLine] = []
    refused: list[LineOutcome] = []
    for offset, line in enumerate(raw):
        admitted = parse_line(state, caller, row, first_line + offset, line.removesuffix(b"\r"))
        if isinstance(admitted, AdmittedLine):
            kept = await screened_line(state, admitted)
        elif isinstance(admitted, AdmittedConversation):
            kept = await screened_conversation(state, admitted)
        else:
            kept = admitted
        (refused if isinstance(kept, LineOutcome) else parked).append(kept)
    received = await state.store.park_import_lines(row.id, row.tenant_id, parked, refused, datetime.now(UTC))
    return ChunkOut(
        import_id=row.id,
        received=received,
        errors=[LineError(line=r.line_no, decision=r.decision, reason=r.reason, field=r.field) for r in refused],
        next_line=last + 1,
    )


@dataclass(frozen=True)
class AdmittedLine:
    """A candidate line admitted as `POST /v1/memories` admits its body, not yet screened nor parked."""

    line_no: int
    input: RememberInput
    content: str


def parse_line(
    state: ApiState, caller: Principal, row: ImportRow, line_no: int, raw: bytes
) -> AdmittedLine | AdmittedConversation | LineOutcome:
    """One line, parked for the workflow or refused with a reason code (never its text).

    The dispatch by kind: a conversation (`{"session_id", "messages"}`) goes to `conversation_line`, any
    other object is a candidate (the body of `POST /v1/memories`) for `candidate_line`.
    """

    def refuse(reason: str, field: str | None = None) -> LineOutcome:
        return LineOutcome(line_no, "ERROR", reason, field=field)

    if len(raw) > state.settings.import_line_max_bytes:
        return refuse("line_too_large")
    if not raw.strip():
        return refuse("blank_line")
    if json_depth_exceeds(raw, MAX_DEPTH):
        return refuse("json_too_deep")
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return refuse("invalid_json")
    if not isinstance(body, dict):
        return refuse("not_an_object")
    for field, text in _strings(body, ""):
        if control_character(text) or "\x00" in text:
            return refuse("validation_failed", "".join(c for c in field if c.isprintable()) or "body")
    if "messages" in body or "session_id" in body:
        return conversation_line(state, caller, line_no, body)
    return candidate_line(state, caller, row, line_no, body)


def candidate_line(
    state: ApiState, caller: Principal, row: ImportRow, line_no: int, body: dict[str, Any]
) -> AdmittedLine | LineOutcome:
    """A candidate line: admitted exactly as `POST /v1/memories` admits its body (`screened_line` next)."""
    try:
        candidate = CandidateIn.model_validate(body)
    except ValidationError as exc:
        return LineOutcome(line_no, "ERROR", "validation_failed", field=_field_of(exc))
    # A keyed line is the record `POST /v1/memories` would make with that key; an unkeyed one is named by
    # its place in this import, so a retried batch or a re-run of the same file names the same record.
    if candidate.idempotency_key is not None:
        memory_id = _memory_id(caller.tenant, caller.actor, candidate.idempotency_key)
    else:
        memory_id = str(uuid.uuid5(_LINE_NS, f"{row.id}\x00{line_no}"))
    try:
        admitted = admit(state, caller, candidate, memory_id)
    except Problem as problem:
        return LineOutcome(line_no, "ERROR", problem.code, field=problem.field)
    return AdmittedLine(line_no=line_no, input=admitted, content=candidate.content)


async def screened_line(state: ApiState, line: AdmittedLine) -> ParkedLine | LineOutcome:
    """Screen an admitted line before anything of it is parked (decision: screen-before-parking).

    A line the detectors and the gate's first steps reject is decided REJECT on its line, with the same
    `deny` event `POST /v1/memories` records (no content hash; its id derived from the memory id, so a
    re-sent chunk records it once); its text is never written. The rest is parked with its screening,
    which the batch reuses for that very text (`memwarden.prescreened`), and still decided by the gate.
    """
    admitted = line.input
    screening, rejected = await prescreen(state, admitted, line.content)
    if rejected is not None:
        answer = await record_rejection(state, admitted, rejected)
        return LineOutcome(line.line_no, answer.decision.value, answer.reason)
    # The line's claim check holds the admitted input as the activity needs it (the actor as the audit
    # log's pseudonym, as RememberWorkflow's input holds it), its screening and the content; none of it
    # enters history.
    sealed = admitted.model_copy(
        update={"actor": state.pseudonyms.actor(admitted.tenant_id, admitted.actor), "screening": screening}
    )
    payload = json.dumps({"input": sealed.model_dump(mode="json"), "content": line.content})
    return ParkedLine(
        line.line_no, CANDIDATE, payload, subject_hash(state.handle_key, admitted.tenant_id, admitted.owner_id)
    )


@dataclass(frozen=True)
class AdmittedConversation:
    """A conversation line admitted as `POST /v1/conversations` admits its body, not yet screened nor parked."""

    line_no: int
    body: ConversationIn
    target: ConversationTarget


def conversation_line(
    state: ApiState, caller: Principal, line_no: int, body: dict[str, Any]
) -> AdmittedConversation | LineOutcome:
    """A conversation line (`{"session_id", "messages"}`): admitted exactly as `POST /v1/conversations` admits
    its body (the schema, `admit_conversation`'s checks and write target), or refused on its line with the
    route's code and the field it names (`screened_conversation` next)."""
    try:
        conversation = ConversationIn.model_validate(body)
    except ValidationError as exc:
        return LineOutcome(line_no, "ERROR", "validation_failed", field=_field_of(exc))
    try:
        target = admit_conversation(state, caller, conversation)
    except Problem as problem:
        return LineOutcome(line_no, "ERROR", problem.code, field=problem.field)
    return AdmittedConversation(line_no=line_no, body=conversation, target=target)


async def screened_conversation(state: ApiState, line: AdmittedConversation) -> ParkedLine | LineOutcome:
    """Withhold the messages holding a secret before anything is parked, as the route does (`withhold`: one
    `deny` event per message, never its text), and park the rest in `import_lines` for ImportWorkflow, which
    hands it to ConversationWorkflow when the import reaches it. Every message withheld: the line is REJECT,
    naming the first (no workflow runs, as the route runs none)."""
    messages = [Message.model_validate(m.model_dump()) for m in line.body.messages]
    withheld = await withhold(state, line.target, line.body.session_id, messages)
    kept = [i for i in range(len(messages)) if i not in withheld]
    if not kept:
        first = min(withheld)
        return LineOutcome(line.line_no, "REJECT", withheld[first], field=f"messages.{first}.content")
    parked = ImportedConversation(
        session_id=line.body.session_id,
        received_at=datetime.now(UTC),
        messages=[messages[i] for i in kept],
        kept=kept,
        withheld=withheld,
        target=line.target,
        concurrency=state.settings.conversation_concurrency,
    )
    target = line.target
    return ParkedLine(
        line.line_no,
        CONVERSATION,
        parked.model_dump_json(),
        subject_hash(state.handle_key, target.tenant_id, target.owner_id),
    )


def _field_of(exc: ValidationError) -> str:
    """The first field a validation error names, dotted (`messages.0.role`), or `body`."""
    first = exc.errors()[0]
    return ".".join(str(p) for p in first.get("loc", ())) or "body"


@router.post("/{import_id}/start", response_model=ImportOut, status_code=202)
async def start_import(state: State, caller: Caller, import_id: str) -> ImportOut:
    """Start ImportWorkflow once every line has arrived; repeating it is harmless."""
    _may_write(caller)
    row = await _own_import(state, caller, import_id)
    missing = await state.store.first_missing_line(row.id, row.total_lines)
    if missing is not None:
        raise Problem(
            409, "import_incomplete", f"line {missing} has not been uploaded", extra={"missing_line": missing}
        )
    settings = state.settings
    workflow_id = import_workflow_id(row.id)
    await state.store.set_import_status(
        row.id, "running", expect=("uploading",), at=datetime.now(UTC), workflow_id=workflow_id
    )
    if row.status != "done":
        try:
            await state.temporal.start_workflow(
                ImportWorkflow.run,
                ImportInput(
                    import_id=row.id,
                    tenant_id=row.tenant_id,
                    total_lines=row.total_lines,
                    batch_size=settings.import_batch_size,
                    heartbeat_seconds=settings.import_heartbeat_seconds,
                    policy=settings.gate_policy,
                ),
                id=workflow_id,
                task_queue=settings.temporal_task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            )
        except WorkflowAlreadyStartedError:
            pass  # started before (and finished): the import's lines are all decided
        except Exception:
            raise Problem(503, "import_not_started", "the import could not be started; repeat the request") from None
    current = await state.store.get_import(row.tenant_id, row.id)
    assert current is not None
    return await _answer(state, current, errors_after=0, limit=100)


@router.get("/{import_id}", response_model=ImportOut)
async def get_import(
    state: State,
    caller: Caller,
    import_id: str,
    errors_after: Annotated[int, Query(ge=0, description="List lines not applied after this line number.")] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> ImportOut:
    row = await _own_import(state, caller, import_id, read=True)
    return await _answer(state, row, errors_after=errors_after, limit=limit)


async def _answer(state: ApiState, row: ImportRow, *, errors_after: int, limit: int) -> ImportOut:
    store = state.store
    counts = await store.import_counts(row.id)
    parked_from = await store.import_position(row.id)
    done = sum(counts.values())
    received = await store.import_received(row.id)
    errors = await store.import_errors(row.id, after=errors_after, limit=limit + 1)
    more = len(errors) > limit
    errors = errors[:limit]
    if parked_from is not None:
        position = parked_from
    else:
        position = row.total_lines + 1 if done >= row.total_lines else done + 1
    return ImportOut(
        import_id=row.id,
        status=row.status,
        total_lines=row.total_lines,
        received_lines=received,
        done_lines=done,
        position=position,
        counts={d: counts.get(d, 0) for d in DECISIONS},
        errors=[LineError(line=e.line_no, decision=e.decision, reason=e.reason, field=e.field) for e in errors],
        next_errors_after=errors[-1].line_no if more and errors else None,
        workflow_id=row.workflow_id,
        created_at=row.created_at,
        started_at=row.started_at,
        completed_at=row.completed_at,
        line_max_bytes=state.settings.import_line_max_bytes,
        request_max_bytes=state.settings.max_request_bytes,
    )
