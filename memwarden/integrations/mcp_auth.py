"""The MCP SDK's bearer-token check over memwarden's own identity (the `mcp` extra).

Why: `/mcp` must accept exactly the tokens the HTTP API accepts (local HS256 ones and, with a JWKS,
the issuer's), so a principal gets nothing through MCP it would not get through HTTP. The SDK asks a
`TokenVerifier` for an `AccessToken`; this one asks `memwarden.jwks.TokenVerifier`, the verifier every
route uses, and answers None (-> the SDK's 401 with `WWW-Authenticate`) for any token it refuses.
Nothing here logs a token or a claim.
"""

from __future__ import annotations

from typing import Any

import jwt
from mcp.server.auth.provider import AccessToken

from memwarden.identity import AuthError
from memwarden.jwks import TokenVerifier


class MemwardenTokenVerifier:
    """An `mcp.server.auth.provider.TokenVerifier`: a bearer token is valid for MCP iff it is for the API."""

    def __init__(self, verifier: TokenVerifier, *, resource: str | None = None) -> None:
        self._verifier = verifier
        self._resource = resource

    async def verify_token(self, token: str) -> AccessToken | None:
        await self._verifier.prefetch(token)  # a rotated JWKS key is fetched, as the API's middleware does
        try:
            principal = self._verifier.verify(token)
        except AuthError:
            return None
        # Verified above (signature, iss, aud, lifetime); read back only the expiry the SDK re-checks.
        claims: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
        expires = claims.get("exp")
        return AccessToken(
            token=token,
            client_id=principal.agent or principal.actor,
            scopes=[],
            expires_at=int(expires) if isinstance(expires, int | float) else None,
            resource=self._resource,
            subject=f"{principal.tenant}/{principal.actor}",
            claims={"iss": claims.get("iss")},
        )
