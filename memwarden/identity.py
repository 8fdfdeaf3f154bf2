"""Who is asking, and which namespaces that lets them read or write.

Authorization is computed here once, as a `ReadFilter` that the index and the store apply inside
their queries; nothing downstream decides access from similarity or from what a hit happens to be.
"""

from __future__ import annotations

import time
from enum import StrEnum
from typing import Any

import jwt
from pydantic import BaseModel, ConfigDict, Field

from memwarden.keys import Purpose, derive_key
from memwarden.records import (
    MemoryRecord,
    MemoryType,
    NamespaceClause,
    ReadFilter,
    Scope,
    Sensitivity,
    SourceKind,
)

ALGORITHM = "HS256"
"""Locally minted tokens (`memwarden token`): HMAC under the token key derived from the service's secret."""
ASYMMETRIC_ALGORITHMS = ("RS256", "ES256")
"""An external issuer's tokens, verified against its JWKS (memwarden.jwks)."""
DEFAULT_AUDIENCE = "memwarden"
DEFAULT_MAX_TTL_SECONDS = 24 * 3600
DEFAULT_LEEWAY_SECONDS = 30


class Role(StrEnum):
    USER = "user"
    AGENT = "agent"
    OPERATOR = "operator"
    PRIVACY = "privacy"
    SYSTEM = "system"


class Principal(BaseModel):
    """The verified claims of a bearer token."""

    model_config = ConfigDict(frozen=True)

    tenant: str = Field(min_length=1, max_length=128)
    sub: str = Field(min_length=1, max_length=256)
    role: Role
    agent: str | None = Field(default=None, max_length=256)
    on_behalf_of: str | None = Field(default=None, max_length=256)
    stores: tuple[str, ...] = ()
    moderates: tuple[str, ...] = ()
    """Shared stores whose PENDING writes this principal may confirm or decline (the stores' moderators)."""

    @property
    def actor(self) -> str:
        """A stable, content-free label for audit: role and subject."""
        return f"{self.role.value}:{self.sub}"

    @property
    def subject_owner(self) -> str | None:
        """The person whose memories this principal acts on, if any."""
        if self.role is Role.USER:
            return self.sub
        if self.role is Role.AGENT:
            return self.on_behalf_of
        return None


class AuthError(Exception):
    """The token is missing, malformed, expired or signed with another key (-> 401)."""


class Forbidden(Exception):
    """The principal is known but may not do this (-> 403, or 404 where existence must not leak)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def token_key(secret: str) -> bytes:
    """The HS256 key: derived from the secret for tokens alone (memwarden.keys)."""
    return derive_key(secret, Purpose.TOKENS)


def mint_token(
    secret: str,
    *,
    tenant: str,
    sub: str,
    role: Role | str,
    agent: str | None = None,
    on_behalf_of: str | None = None,
    stores: list[str] | tuple[str, ...] = (),
    moderates: list[str] | tuple[str, ...] = (),
    ttl_seconds: int = 3600,
    issuer: str = "memwarden",
    audience: str = DEFAULT_AUDIENCE,
    max_ttl_seconds: int = DEFAULT_MAX_TTL_SECONDS,
    now: float | None = None,
) -> str:
    """A local HS256 token; refuses a lifetime over `max_ttl_seconds`, which verification would refuse too."""
    if ttl_seconds > max_ttl_seconds:
        raise ValueError(f"a token lives at most {max_ttl_seconds} seconds (asked for {ttl_seconds})")
    principal = Principal(
        tenant=tenant,
        sub=sub,
        role=Role(role),
        agent=agent,
        on_behalf_of=on_behalf_of,
        stores=tuple(stores),
        moderates=tuple(moderates),
    )
    if principal.role is Role.AGENT and not principal.agent:
        raise ValueError("an agent token needs --agent")
    issued = int(now if now is not None else time.time())
    claims: dict[str, object] = {
        "iss": issuer,
        "aud": audience,
        "tenant": principal.tenant,
        "sub": principal.sub,
        "role": principal.role.value,
        "iat": issued,
        "exp": issued + ttl_seconds,
    }
    if principal.agent:
        claims["agent"] = principal.agent
    if principal.on_behalf_of:
        claims["on_behalf_of"] = principal.on_behalf_of
    if principal.stores:
        claims["stores"] = list(principal.stores)
    if principal.moderates:
        claims["moderates"] = list(principal.moderates)
    return jwt.encode(claims, token_key(secret), algorithm=ALGORITHM)


def decode_claims(
    token: str,
    key: Any,
    *,
    algorithm: str,
    issuer: str,
    audience: str,
    max_ttl_seconds: int,
    leeway_seconds: int,
) -> dict[str, Any]:
    """The verified claims: signature under `key` with exactly `algorithm`, issuer, audience, times, lifetime."""
    try:
        claims: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[algorithm],
            issuer=issuer,
            audience=audience,
            leeway=leeway_seconds,
            options={"require": ["exp", "iat", "sub", "iss", "aud"]},
        )
    except jwt.PyJWTError as exc:
        raise AuthError(type(exc).__name__) from None
    exp, iat = claims["exp"], claims["iat"]
    if not isinstance(exp, int | float) or not isinstance(iat, int | float) or exp - iat > max_ttl_seconds:
        raise AuthError("token lifetime exceeds the maximum")
    return claims


def principal_from_claims(claims: dict[str, Any]) -> Principal:
    """Verified claims -> the principal; AuthError when they do not describe one."""
    try:
        stores = claims.get("stores") or []
        moderates = claims.get("moderates") or []
        if not isinstance(stores, list) or not isinstance(moderates, list):
            raise AuthError("stores and moderates claims must be lists")
        principal = Principal(
            tenant=claims["tenant"],
            sub=claims["sub"],
            role=claims["role"],
            agent=claims.get("agent"),
            on_behalf_of=claims.get("on_behalf_of"),
            stores=tuple(str(s) for s in stores),
            moderates=tuple(str(s) for s in moderates),
        )
    except (KeyError, ValueError) as exc:
        raise AuthError("invalid claims") from exc
    if principal.role is Role.AGENT and not principal.agent:
        raise AuthError("agent token without agent claim")
    return principal


def verify_token(
    token: str,
    secret: str,
    *,
    issuer: str = "memwarden",
    audience: str = DEFAULT_AUDIENCE,
    max_ttl_seconds: int = DEFAULT_MAX_TTL_SECONDS,
    leeway_seconds: int = DEFAULT_LEEWAY_SECONDS,
) -> Principal:
    """A local HS256 token's principal (raises AuthError)."""
    claims = decode_claims(
        token,
        token_key(secret),
        algorithm=ALGORITHM,
        issuer=issuer,
        audience=audience,
        max_ttl_seconds=max_ttl_seconds,
        leeway_seconds=leeway_seconds,
    )
    return principal_from_claims(claims)


def read_filter(
    principal: Principal,
    *,
    types: tuple[MemoryType, ...] | None = None,
    max_sensitivity: Sensitivity = Sensitivity.RESTRICTED,
) -> ReadFilter:
    """The namespaces a principal may read memory *content* from.

    - user: their own user-scoped memories, what agents keep privately about them (it is theirs
      to see), and the shared stores they are a member of.
    - agent: the user-scoped memories of the user it serves, its own private memories (about that
      user, or about no user), and its shared stores. Never another agent's private store.
    - operator, privacy, system: no content through search (metadata and receipts elsewhere).
    """
    clauses: list[NamespaceClause] = []
    if principal.role is Role.USER:
        clauses.append(NamespaceClause(scope=Scope.USER, owner_ids=(principal.sub,)))
        clauses.append(NamespaceClause(scope=Scope.AGENT, owner_ids=(principal.sub,)))
    elif principal.role is Role.AGENT:
        assert principal.agent is not None
        own = tuple(o for o in (principal.on_behalf_of, agent_self_owner(principal.agent)) if o)
        if principal.on_behalf_of:
            clauses.append(NamespaceClause(scope=Scope.USER, owner_ids=(principal.on_behalf_of,)))
        clauses.append(NamespaceClause(scope=Scope.AGENT, owner_ids=own, agent_id=principal.agent))
    if principal.stores and principal.role in (Role.USER, Role.AGENT):
        clauses.append(NamespaceClause(scope=Scope.SHARED, stores=tuple(sorted(principal.stores))))
    return ReadFilter(tenant_id=principal.tenant, clauses=tuple(clauses), types=types, max_sensitivity=max_sensitivity)


def agent_self_owner(agent: str) -> str:
    """owner_id of an agent's memories that are about no user (its own procedures, say)."""
    return f"agent:{agent}"


def may_settle(principal: Principal, record: MemoryRecord) -> bool:
    """Who confirms or declines a PENDING write: the person it is about, never the agent that proposed it.

    - a shared store's write: a moderator of that store (`moderates` claim);
    - an agent's memory about no user (its own procedures): an operator of the tenant, since it changes
      how the agent behaves for everyone it serves;
    - anything else: the owner, signed in as a user.
    """
    if principal.tenant != record.tenant_id:
        return False
    if record.scope is Scope.SHARED:
        return principal.role in (Role.USER, Role.AGENT) and record.store in principal.moderates
    if record.owner_id.startswith("agent:"):
        return principal.role is Role.OPERATOR
    return principal.role is Role.USER and principal.sub == record.owner_id


SOURCE_KINDS: dict[Role, frozenset[SourceKind]] = {
    Role.USER: frozenset({SourceKind.USER, SourceKind.APP, SourceKind.TOOL, SourceKind.MODEL, SourceKind.DOCUMENT}),
    Role.AGENT: frozenset({SourceKind.USER, SourceKind.APP, SourceKind.TOOL, SourceKind.MODEL, SourceKind.DOCUMENT}),
    Role.SYSTEM: frozenset({SourceKind.SYSTEM}),
    Role.OPERATOR: frozenset(),
    Role.PRIVACY: frozenset(),
}
"""The source kinds each role may declare: the trust a write gets comes from who holds the token.

A person states things (`user`) and may file lower-trust observations; an agent relays its user's
statements as `user` (instruction-like text from a trusted source waits for the person to confirm it)
and its own observations as `app`, `tool` or `model`; only a `system` principal writes `system`
memories, and only for a source it speaks for (`check_source_kind`). `document` may be declared by
anyone because the gate refuses it as knowledge, not memory. docs/architecture.md, Identity."""


def check_source_kind(principal: Principal, kind: SourceKind) -> None:
    """Raise Forbidden unless this principal's role may declare `kind` (`role_cannot_write` when none)."""
    allowed = SOURCE_KINDS[principal.role]
    if not allowed:
        raise Forbidden("role_cannot_write")
    if kind not in allowed:
        raise Forbidden("source_kind_not_allowed")


class WriteTarget(BaseModel):
    """The namespace a candidate will be written into, after the principal was checked."""

    tenant_id: str
    owner_id: str
    scope: Scope
    agent_id: str | None = None
    store: str | None = None


def write_target(principal: Principal, *, scope: Scope, owner_id: str | None, store: str | None) -> WriteTarget:
    """Where a principal may write; raises Forbidden with a reason code otherwise.

    A system of record writes about one person of its tenant (`owner_id`, user scope): the facts it
    owns, each citing its record (`source_ref`, checked by the caller against the source's principals).
    """
    if principal.role not in (Role.USER, Role.AGENT, Role.SYSTEM):
        raise Forbidden("role_cannot_write")
    if principal.role is Role.SYSTEM:
        if scope is not Scope.USER or store is not None:
            raise Forbidden("system_writes_user_scope")
        if owner_id is None:
            raise Forbidden("owner_required")
        return WriteTarget(tenant_id=principal.tenant, owner_id=owner_id, scope=scope)
    if principal.role is Role.USER:
        if owner_id not in (None, principal.sub):
            raise Forbidden("owner_mismatch")
        owner = principal.sub
        if scope is Scope.AGENT:
            raise Forbidden("user_cannot_write_agent_scope")
    else:
        assert principal.agent is not None
        if scope is Scope.AGENT:
            allowed = {principal.on_behalf_of, agent_self_owner(principal.agent)} - {None}
            owner = owner_id or principal.on_behalf_of or agent_self_owner(principal.agent)
            if owner not in allowed:
                raise Forbidden("owner_mismatch")
        else:
            if not principal.on_behalf_of:
                raise Forbidden("agent_serves_no_user")
            if owner_id not in (None, principal.on_behalf_of):
                raise Forbidden("owner_mismatch")
            owner = principal.on_behalf_of
    if scope is Scope.SHARED:
        if not store:
            raise Forbidden("store_required")
        if store not in principal.stores:
            raise Forbidden("not_a_store_member")
        return WriteTarget(tenant_id=principal.tenant, owner_id=owner, scope=scope, store=store)
    if store is not None:
        raise Forbidden("store_only_for_shared_scope")
    agent_id = principal.agent if scope is Scope.AGENT else None
    return WriteTarget(tenant_id=principal.tenant, owner_id=owner, scope=scope, agent_id=agent_id)
