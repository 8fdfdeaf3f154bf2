"""`/me`: the person's page. Server-rendered (Jinja2), forms that post and redirect, one small script.

Every action calls the same route function the JSON API serves (PATCH, DELETE, confirm/decline,
settings, receipts, export), so the page gets the API's authorization, gate, spans and audit events,
and cannot drift from it. Problems those raise become a notice on the page, or a 404 page: another
person's memory id answers 404 here exactly as on the API. Notices travel in the redirect as codes
(never text a person typed).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, PackageLoader, select_autoescape

from api.me import session as sessions
from api.me.labels import NOTICES, REASONS, SCOPES, SOURCES, STATUSES, TYPES, notice_for, status_group
from api.problems import Problem
from api.routes import correct, forget, memories, remediation
from api.routes import settings as settings_routes
from api.routes.export import audited_export, subject_filter
from api.schemas import MemoryPatchIn, SettingsIn
from api.state import ApiState
from memwarden.identity import AuthError, Role
from memwarden.records import LIVE_STATUSES, MemoryRecord, Status

router = APIRouter(prefix="/me", include_in_schema=False)
STATIC_DIR = Path(__file__).parent / "static"
PAGE_SIZE = 50
_CODE = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,256}$")
FILTERS = {
    "all": tuple(s for s in Status if s is not Status.PENDING),
    "live": tuple(sorted(LIVE_STATUSES)),
    "past": tuple(s for s in Status if s is not Status.PENDING and s not in LIVE_STATUSES),
}
"""The list's filters; pending writes are always shown on their own, above the list, until settled."""
FINAL_DELETION = ("verified", "failed")

_env = Environment(loader=PackageLoader("api.me", "templates"), autoescape=select_autoescape(), auto_reload=False)
_env.globals.update(types=TYPES, sources=SOURCES, reasons=REASONS, statuses=STATUSES, scopes=SCOPES)


def _when(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if value else ""


_env.filters["when"] = _when
_env.filters["group"] = status_group

SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}


def mount_static(app: Any) -> None:
    """The page's stylesheet and script, served by the API itself (no CDN)."""
    app.mount("/me/static", StaticFiles(directory=STATIC_DIR), name="me-static")


def _state(request: Request) -> ApiState:
    return request.app.state.mw  # type: ignore[no-any-return]


def render(name: str, status: int = 200, **context: Any) -> HTMLResponse:
    html = _env.get_template(name).render(**context)
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def _redirect(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303, headers={"Cache-Control": "no-store"})


def _code(value: str | None) -> str | None:
    return value if value and _CODE.match(value) else None


def _page(request: Request, session: sessions.Session, template: str, status: int = 200, **context: Any) -> Response:
    settings = _state(request).settings
    return render(
        template,
        status,
        principal=session.principal,
        csrf=sessions.csrf_token(settings, session),
        csrf_field=sessions.CSRF_FIELD,
        **context,
    )


def _not_found(request: Request, session: sessions.Session) -> Response:
    return _page(request, session, "not_found.html", 404)


def _signin_page(request: Request, status: int = 200, error: str | None = None) -> Response:
    settings = _state(request).settings
    nonce = sessions.signin_nonce(request)
    response = render(
        "signin.html",
        status,
        signin_csrf=sessions.signin_token(settings, nonce),
        csrf_field=sessions.CSRF_FIELD,
        error=error,
    )
    sessions.set_signin_cookie(response, settings, request, nonce)
    return response


class _Gate:
    """The outcome of authenticating a page request: a session, or the response to send instead."""

    def __init__(self, session: sessions.Session | None = None, response: Response | None = None) -> None:
        self.session = session
        self.response = response


def _user(request: Request, *, posted: bool = False) -> _Gate:
    """A signed-in person (else the sign-in page, or for a form post a redirect to it; other roles 403)."""
    session = sessions.current_session(_state(request).settings, request)
    if session is None:
        return _Gate(response=_redirect("/me") if posted else _signin_page(request))
    if session.principal.role is not Role.USER:
        return _Gate(response=render("wrong_role.html", 403, role=session.principal.role.value))
    return _Gate(session=session)


def _posted(request: Request, csrf: str | None) -> _Gate:
    """A state-changing request: signed in, and carrying this session's CSRF token (else 403, nothing done)."""
    gate = _user(request, posted=True)
    if gate.session is not None and not sessions.check_csrf(_state(request).settings, gate.session, csrf):
        return _Gate(response=_page(request, gate.session, "csrf_failed.html", 403))
    return gate


# -- sign in and out --------------------------------------------------------------------------


@router.post("/sign-in")
async def sign_in(request: Request, token: str = Form(default=""), csrf: str = Form(default="")) -> Response:
    """Paste a token: verified, then kept in an HttpOnly SameSite=Strict cookie (never shown to scripts)."""
    settings = _state(request).settings
    if not sessions.check_signin(settings, request, csrf):
        return _signin_page(request, 403, error="csrf")
    try:
        principal = sessions.verify(settings, token)
    except AuthError:
        return _signin_page(request, 401, error="invalid_token")
    if principal.role is not Role.USER:
        return _signin_page(request, 403, error="not_a_user")
    response = _redirect("/me")
    sessions.set_session_cookie(response, settings, request, token.strip())
    return response


@router.post("/sign-out")
async def sign_out(request: Request, csrf: str = Form(default="")) -> Response:
    gate = _posted(request, csrf)
    if gate.response is not None:
        return gate.response
    response = _redirect("/me")
    sessions.clear_session_cookie(response, _state(request).settings, request)
    return response


# -- the list ---------------------------------------------------------------------------------


@router.get("")
async def home(
    request: Request,
    show: str = "all",
    cursor: str | None = None,
    done: str | None = None,
    decision: str | None = None,
    reason: str | None = None,
    focus: str | None = None,
) -> Response:
    """Every memory about the signed-in person, live and past, newest first; pending ones first of all."""
    gate = _user(request)
    if gate.session is None:
        assert gate.response is not None
        return gate.response
    session = gate.session
    state = _state(request)
    principal = session.principal
    statuses = FILTERS.get(show, FILTERS["all"])
    try:
        records, next_cursor = await state.store.list_memories(
            subject_filter(principal.tenant, principal.sub, statuses), limit=PAGE_SIZE, cursor=cursor
        )
    except ValueError:
        records, next_cursor = [], None
    pending, _ = await state.store.list_memories(
        subject_filter(principal.tenant, principal.sub, (Status.PENDING,)), limit=PAGE_SIZE, cursor=None
    )
    enabled = await state.store.get_settings(principal.tenant, principal.sub)
    return _page(
        request,
        session,
        "memories.html",
        memories=records,
        pending=pending,
        show=show if show in FILTERS else "all",
        filters=list(FILTERS),
        next_cursor=next_cursor,
        memory_enabled=enabled,
        notice=notice_for(_code(done), _code(decision), _code(reason)),
        focus=focus if focus and _ID.match(focus) else None,
    )


# -- edit -------------------------------------------------------------------------------------


async def _own(request: Request, session: sessions.Session, memory_id: str) -> MemoryRecord | None:
    try:
        return await correct.owned_memory(_state(request), session.principal, memory_id)
    except Problem:
        return None


@router.get("/memories/{memory_id}/edit")
async def edit_form(request: Request, memory_id: str) -> Response:
    gate = _user(request)
    if gate.session is None:
        assert gate.response is not None
        return gate.response
    record = await _own(request, gate.session, memory_id)
    if record is None:
        return _not_found(request, gate.session)
    return _page(request, gate.session, "edit.html", memory=record, editable=record.status in LIVE_STATUSES)


@router.post("/memories/{memory_id}/edit")
async def edit(
    request: Request,
    memory_id: str,
    content: str = Form(default=""),
    version: int | None = Form(default=None),
    csrf: str = Form(default=""),
) -> Response:
    """A correction: PATCH /v1/memories/{id} on the person's behalf; the new version supersedes the old."""
    gate = _posted(request, csrf)
    if gate.session is None:
        assert gate.response is not None
        return gate.response
    session = gate.session
    if await _own(request, session, memory_id) is None:
        return _not_found(request, session)
    if not content.strip():
        return _redirect(f"/me?done=edit_blank&focus={memory_id}")
    if len(content) > _state(request).settings.max_content_chars:
        return _redirect(f"/me?done=edit_too_long&focus={memory_id}")
    try:
        answer = await correct.patch_memory(
            state=_state(request),
            caller=session.principal,
            memory_id=memory_id,
            body=MemoryPatchIn(content=content, expected_version=version),
        )
    except Problem as problem:
        return _problem_redirect(problem, memory_id)
    focus = answer.memory_id or memory_id
    return _redirect(f"/me?done=edit&decision={answer.decision.value}&reason={answer.reason}&focus={focus}")


def _problem_redirect(problem: Problem, memory_id: str) -> Response:
    return _redirect(f"/me?done=problem&reason={problem.code}&focus={memory_id}")


# -- version history and revert -----------------------------------------------------------------


@router.get("/memories/{memory_id}/history")
async def history(request: Request, memory_id: str) -> Response:
    """A memory and every earlier version of it, newest first (GET /v1/memories/{id}'s history)."""
    gate = _user(request)
    if gate.session is None:
        assert gate.response is not None
        return gate.response
    session = gate.session
    record = await _own(request, session, memory_id)
    if record is None:
        return _not_found(request, session)
    try:
        detail = await memories.get_memory(state=_state(request), caller=session.principal, memory_id=memory_id)
    except Problem:
        return _not_found(request, session)
    earlier = await _state(request).store.get_many(session.principal.tenant, [h.id for h in detail.history])
    versions = [earlier[h.id] for h in detail.history if h.id in earlier]
    revertible = record.status in LIVE_STATUSES and bool(record.supersedes) and bool(versions)
    return _page(request, session, "history.html", memory=record, versions=versions, revertible=revertible)


@router.post("/memories/{memory_id}/revert")
async def revert(request: Request, memory_id: str, csrf: str = Form(default="")) -> Response:
    """POST /v1/memories/{id}/revert on the person's behalf: the value this version replaced comes back."""
    gate = _posted(request, csrf)
    if gate.session is None:
        assert gate.response is not None
        return gate.response
    session = gate.session
    if await _own(request, session, memory_id) is None:
        return _not_found(request, session)
    try:
        answer = await remediation.revert(state=_state(request), caller=session.principal, memory_id=memory_id)
    except Problem as problem:
        return _problem_redirect(problem, memory_id)
    return _redirect(f"/me?done=revert&focus={answer.memory_id or memory_id}")


# -- confirm / decline ------------------------------------------------------------------------


async def _settle(request: Request, memory_id: str, csrf: str, action: str) -> Response:
    gate = _posted(request, csrf)
    if gate.session is None:
        assert gate.response is not None
        return gate.response
    session = gate.session
    if await _own(request, session, memory_id) is None:
        return _not_found(request, session)
    settle = memories.confirm if action == "confirm" else memories.decline
    try:
        answer = await settle(state=_state(request), caller=session.principal, memory_id=memory_id)
    except Problem as problem:
        return _problem_redirect(problem, memory_id)
    return _redirect(f"/me?done={action}&decision={answer.decision.value}&reason={answer.reason}&focus={memory_id}")


@router.post("/memories/{memory_id}/confirm")
async def confirm(request: Request, memory_id: str, csrf: str = Form(default="")) -> Response:
    return await _settle(request, memory_id, csrf, "confirm")


@router.post("/memories/{memory_id}/decline")
async def decline(request: Request, memory_id: str, csrf: str = Form(default="")) -> Response:
    return await _settle(request, memory_id, csrf, "decline")


# -- delete and its receipt -------------------------------------------------------------------


@router.post("/memories/{memory_id}/delete")
async def delete(request: Request, memory_id: str, csrf: str = Form(default="")) -> Response:
    """DELETE /v1/memories/{id} on the person's behalf, then the receipt's progress page."""
    gate = _posted(request, csrf)
    if gate.session is None:
        assert gate.response is not None
        return gate.response
    session = gate.session
    if await _own(request, session, memory_id) is None:
        return _not_found(request, session)
    try:
        accepted = await forget.delete_memory(state=_state(request), caller=session.principal, memory_id=memory_id)
    except Problem as problem:
        return _problem_redirect(problem, memory_id)
    return _redirect(f"/me/deletions/{accepted.deletion_id}")


async def _receipt(request: Request, session: sessions.Session, deletion_id: str) -> dict[str, Any] | None:
    try:
        return await forget.get_deletion(state=_state(request), caller=session.principal, deletion_id=deletion_id)
    except Problem:
        return None


@router.get("/deletions/{deletion_id}")
async def deletion(request: Request, deletion_id: str) -> Response:
    gate = _user(request)
    if gate.session is None:
        assert gate.response is not None
        return gate.response
    receipt = await _receipt(request, gate.session, deletion_id)
    if receipt is None:
        return _not_found(request, gate.session)
    final = receipt["status"] in FINAL_DELETION
    return _page(request, gate.session, "deletion.html", receipt=receipt, final=final)


@router.get("/deletions/{deletion_id}/status")
async def deletion_status(request: Request, deletion_id: str) -> Response:
    """The progress fragment the deletion page polls until the receipt is verified (or failed)."""
    gate = _user(request)
    if gate.session is None:
        return render("fragment_signed_out.html", 401)
    receipt = await _receipt(request, gate.session, deletion_id)
    if receipt is None:
        return render("fragment_not_found.html", 404)
    return render("deletion_status.html", receipt=receipt, final=receipt["status"] in FINAL_DELETION)


# -- the memory switch and export -------------------------------------------------------------


@router.post("/settings")
async def switch(request: Request, memory_enabled: str = Form(default=""), csrf: str = Form(default="")) -> Response:
    """PUT /v1/settings on the person's behalf: off stops writes and agents' reads; it deletes nothing."""
    gate = _posted(request, csrf)
    if gate.session is None:
        assert gate.response is not None
        return gate.response
    if memory_enabled not in ("on", "off"):
        return _redirect("/me?done=problem&reason=validation_failed")
    enabled = memory_enabled == "on"
    await settings_routes.put_settings(
        state=_state(request), caller=gate.session.principal, body=SettingsIn(memory_enabled=enabled)
    )
    return _redirect(f"/me?done={'switched_on' if enabled else 'switched_off'}")


@router.get("/export")
async def export(request: Request) -> Response:
    """Everything held about the person, as a JSON download (the same document as GET /v1/export)."""
    gate = _user(request)
    if gate.session is None:
        assert gate.response is not None
        return gate.response
    principal = gate.session.principal
    document = await audited_export(_state(request), principal.actor, principal.tenant, principal.sub)
    return Response(
        json.dumps(document, indent=2, ensure_ascii=False),
        media_type="application/json",
        headers={
            **SECURITY_HEADERS,
            "Content-Disposition": 'attachment; filename="memwarden-export.json"',
        },
    )


__all__ = ["NOTICES", "mount_static", "router"]
