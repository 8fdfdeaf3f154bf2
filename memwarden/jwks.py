"""Bearer tokens from an external issuer, verified against its JWKS, beside the service's own local tokens.

Why: with one HS256 secret, whoever issues tokens holds a key that can mint every role of every
tenant. An identity provider that signs with RS256 or ES256 keeps its private key; the service holds
only the public keys it publishes at a JWKS URL (`MEMWARDEN_AUTH_JWKS_URL`), and rotates them by `kid`:
a token naming a `kid` the cached set does not hold makes the set be fetched again (at most once per
`refetch_interval`), and the whole set is refreshed after `max_age`, so a key the issuer withdrew
stops verifying. Local HS256 tokens (`memwarden token`) are accepted unless a JWKS is configured and
`MEMWARDEN_AUTH_LOCAL_TOKENS` is off (the production default then).

Verification is synchronous (routes and the /me page call it from many places); fetching is not:
`prefetch` runs first, from a middleware, for any request carrying a token, so `verify` only reads the
cache. Nothing here logs a token or a claim.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt
from jwt import PyJWK

from memwarden.identity import (
    ALGORITHM,
    ASYMMETRIC_ALGORITHMS,
    AuthError,
    Principal,
    decode_claims,
    principal_from_claims,
    token_key,
)

MAX_JWKS_BYTES = 256 * 1024
_KEY_TYPES = {"RS256": "RSA", "ES256": "EC"}


class JwksError(Exception):
    """The JWKS could not be fetched or parsed (the reason is a code, never the document)."""


@dataclass
class JwksKeys:
    """An issuer's published public keys by `kid`, fetched over HTTP(S) and cached."""

    url: str
    max_age: float = 300.0
    refetch_interval: float = 10.0
    timeout: float = 2.0
    _keys: dict[str, PyJWK] = field(default_factory=dict)
    _fetched_at: float | None = None
    _attempted_at: float | None = None
    _lock: asyncio.Lock | None = None

    def get(self, kid: str) -> PyJWK | None:
        return self._keys.get(kid)

    def needs_fetch(self, kid: str | None, now: float | None = None) -> bool:
        """Fetch when never fetched, when stale, or for a `kid` not held (not more often than `refetch_interval`)."""
        at = time.monotonic() if now is None else now
        if self._fetched_at is None or at - self._fetched_at >= self.max_age:
            return self._attempted_at is None or at - self._attempted_at >= min(self.refetch_interval, self.max_age)
        if kid is not None and kid not in self._keys:
            return self._attempted_at is None or at - self._attempted_at >= self.refetch_interval
        return False

    async def refresh(self) -> None:
        """Fetch the set and replace the cache; on failure keep the cached keys (and raise JwksError)."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            self._attempted_at = time.monotonic()
            try:
                async with httpx.AsyncClient(timeout=self.timeout, follow_redirects=False) as client:
                    response = await client.get(self.url, headers={"Accept": "application/json"})
            except httpx.HTTPError:
                raise JwksError("unreachable") from None
            if response.status_code != 200 or len(response.content) > MAX_JWKS_BYTES:
                raise JwksError(f"http_{response.status_code}")
            self._keys = parse_jwks(response.content)
            self._fetched_at = time.monotonic()


def parse_jwks(body: bytes) -> dict[str, PyJWK]:
    """`{"keys": [...]}` -> signing keys by `kid`; keys without a kid, or of another use or algorithm, are left out."""
    try:
        document = json.loads(body)
    except ValueError:
        raise JwksError("not_json") from None
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise JwksError("no_keys")
    keys: dict[str, PyJWK] = {}
    for entry in document["keys"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("kid"), str):
            continue
        if entry.get("use", "sig") != "sig" or entry.get("kty") not in _KEY_TYPES.values():
            continue
        try:
            keys[entry["kid"]] = PyJWK(entry)
        except (jwt.PyJWKError, jwt.InvalidKeyError):
            continue
    return keys


@dataclass
class TokenVerifier:
    """Every bearer token the service accepts: local HS256 ones and, with a JWKS, an issuer's RS256/ES256 ones."""

    secret: str
    issuer: str
    audience: str
    max_ttl_seconds: int
    leeway_seconds: int
    jwks: JwksKeys | None = None
    accept_local: bool = True
    jwks_issuer: str | None = None
    """The `iss` of the issuer's tokens (default: the same as local tokens')."""

    def verify(self, token: str) -> Principal:
        """The token's principal, or AuthError (an unknown `kid` is unknown until `prefetch` fetched it)."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise AuthError("malformed") from None
        alg = header.get("alg")
        if alg == ALGORITHM:
            if not self.accept_local:
                raise AuthError("local tokens are not accepted")
            key: Any = token_key(self.secret)
            issuer = self.issuer
        elif alg in ASYMMETRIC_ALGORITHMS and self.jwks is not None:
            kid = header.get("kid")
            found = self.jwks.get(kid) if isinstance(kid, str) else None
            if found is None:
                raise AuthError("unknown kid")
            if found.key_type != _KEY_TYPES[alg] or found.algorithm_name != alg:
                raise AuthError("key and algorithm disagree")
            key = found.key
            issuer = self.jwks_issuer or self.issuer
        else:
            raise AuthError("algorithm not accepted")
        claims = decode_claims(
            token,
            key,
            algorithm=alg,
            issuer=issuer,
            audience=self.audience,
            max_ttl_seconds=self.max_ttl_seconds,
            leeway_seconds=self.leeway_seconds,
        )
        return principal_from_claims(claims)

    async def prefetch(self, token: str) -> None:
        """Make sure the key an asymmetric token names is cached (fetching the set if it is not, or is stale)."""
        if self.jwks is None:
            return
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            return
        if header.get("alg") not in ASYMMETRIC_ALGORITHMS:
            return
        kid = header.get("kid")
        if self.jwks.needs_fetch(kid if isinstance(kid, str) else None):
            try:
                await self.jwks.refresh()
            except JwksError:
                return  # verification then fails on the cached set: 401, never 500
