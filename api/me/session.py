"""Who is signed in on `/me`, and the CSRF tokens that tie every form to that session.

Embedded profile: the person pastes a bearer token (`memwarden token --role user ...`) once; it is
verified and kept in an HttpOnly, SameSite=Strict cookie scoped to `/me`, so page scripts never see
it and other sites' pages cannot send it. Behind an OIDC proxy, the proxy injects
`Authorization: Bearer <memwarden token>` instead and the page reads that
(docs/decisions/me-page-behind-a-proxy.md).

CSRF: every state-changing form carries `HMAC(k, "session" | sha256(credential))`, where `k` is the
CSRF key derived from the service's secret (memwarden.keys) and the credential is the session's
token: an attacker can neither read the HttpOnly cookie nor compute the HMAC, and a token from one
session is useless in another. The sign-in
form, before any session exists, is tied the same way to a random nonce in its own short-lived cookie
(login CSRF: nobody can sign a victim in as themself).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass

import jwt
from fastapi import Request
from fastapi.responses import Response

from memwarden.config import Settings
from memwarden.identity import AuthError, Principal
from memwarden.keys import Purpose

SESSION_COOKIE = "mw_me"
SIGNIN_COOKIE = "mw_me_signin"
COOKIE_PATH = "/me"
SIGNIN_TTL_SECONDS = 15 * 60
CSRF_FIELD = "csrf"


@dataclass(frozen=True)
class Session:
    """A verified user on the page, and the credential their CSRF token is derived from."""

    principal: Principal
    credential: str
    from_cookie: bool


def _key(settings: Settings) -> bytes:
    return settings.key_for(Purpose.CSRF)


def _mac(settings: Settings, purpose: str, value: str) -> str:
    digest = hashlib.sha256(value.encode()).digest()
    tag = hmac.new(_key(settings), purpose.encode() + b"\x00" + digest, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(tag).rstrip(b"=").decode()


def csrf_token(settings: Settings, session: Session) -> str:
    """The token every form of this session carries."""
    return _mac(settings, "session", session.credential)


def check_csrf(settings: Settings, session: Session, submitted: str | None) -> bool:
    return bool(submitted) and hmac.compare_digest(csrf_token(settings, session), submitted or "")


def signin_nonce(request: Request) -> str:
    """The sign-in form's nonce: the one in its cookie if still there, else a new one."""
    return request.cookies.get(SIGNIN_COOKIE) or secrets.token_urlsafe(24)


def signin_token(settings: Settings, nonce: str) -> str:
    return _mac(settings, "signin", nonce)


def check_signin(settings: Settings, request: Request, submitted: str | None) -> bool:
    nonce = request.cookies.get(SIGNIN_COOKIE)
    return bool(nonce and submitted) and hmac.compare_digest(signin_token(settings, nonce or ""), submitted or "")


def _secure(settings: Settings, request: Request) -> bool:
    return settings.me_cookie_secure if settings.me_cookie_secure is not None else request.url.scheme == "https"


def set_signin_cookie(response: Response, settings: Settings, request: Request, nonce: str) -> None:
    response.set_cookie(
        SIGNIN_COOKIE,
        nonce,
        max_age=SIGNIN_TTL_SECONDS,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=_secure(settings, request),
    )


def set_session_cookie(response: Response, settings: Settings, request: Request, token: str) -> None:
    """Keep the verified token for as long as it is valid (its `exp`), HttpOnly and SameSite=Strict."""
    exp = jwt.decode(token, options={"verify_signature": False}).get("exp")
    max_age = max(int(exp - time.time()), 0) if isinstance(exp, int | float) else 3600
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=max_age,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=_secure(settings, request),
    )
    response.delete_cookie(SIGNIN_COOKIE, path=COOKIE_PATH)


def clear_session_cookie(response: Response, settings: Settings, request: Request) -> None:
    response.delete_cookie(
        SESSION_COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict", secure=_secure(settings, request)
    )


def verify(settings: Settings, token: str) -> Principal:
    """A token's principal (raises AuthError); any role, the caller decides who may use the page."""
    return settings.token_verifier.verify(token.strip())


def current_session(settings: Settings, request: Request) -> Session | None:
    """The signed-in user: the session cookie, else a proxy's `Authorization: Bearer`; None if neither is valid."""
    candidates: list[tuple[str, bool]] = []
    cookie = request.cookies.get(SESSION_COOKIE)
    if cookie:
        candidates.append((cookie, True))
    scheme, _, bearer = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() == "bearer" and bearer.strip():
        candidates.append((bearer.strip(), False))
    for token, from_cookie in candidates:
        try:
            principal = verify(settings, token)
        except AuthError:
            continue
        return Session(principal=principal, credential=token, from_cookie=from_cookie)
    return None
