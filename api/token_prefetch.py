"""Fetches an issuer's JWKS before a route verifies a token that names a key not yet cached.

Routes, the codec endpoint and the /me page verify tokens synchronously from many places
(memwarden.jwks.TokenVerifier.verify reads a cache); this middleware runs first, awaits the fetch a
rotation needs, and hands on. Without a JWKS configured it does nothing.
"""

from __future__ import annotations

from http.cookies import SimpleCookie

from starlette.types import ASGIApp, Receive, Scope, Send

from memwarden.jwks import TokenVerifier

SESSION_COOKIE = "mw_me"
CODEC_TOKEN_PREFIX = "/codec/t/"


def request_tokens(scope: Scope) -> list[str]:
    """The bearer tokens a request carries: the Authorization header, the /me cookie, a codec path token."""
    found: list[str] = []
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            kind, _, token = value.decode("latin-1").partition(" ")
            if kind.lower() == "bearer" and token.strip():
                found.append(token.strip())
        elif name == b"cookie":
            cookie = SimpleCookie()
            try:
                cookie.load(value.decode("latin-1"))
            except Exception:  # a malformed cookie header is the route's business, not this one's
                continue
            if SESSION_COOKIE in cookie:
                found.append(cookie[SESSION_COOKIE].value)
    path = scope.get("path", "")
    if path.startswith(CODEC_TOKEN_PREFIX):
        found.append(path[len(CODEC_TOKEN_PREFIX) :].split("/", 1)[0])
    return found


class TokenPrefetchMiddleware:
    def __init__(self, app: ASGIApp, verifier: TokenVerifier) -> None:
        self.app = app
        self.verifier = verifier

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.verifier.jwks is not None:
            for token in request_tokens(scope):
                await self.verifier.prefetch(token)
        await self.app(scope, receive, send)
