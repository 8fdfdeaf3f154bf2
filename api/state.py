"""What the API process holds open, and the FastAPI dependencies that hand it to routes."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Annotated

from fastapi import Depends, Request
from temporalio.client import Client

from api.problems import Problem
from memwarden.config import Settings
from memwarden.forget import subject_key
from memwarden.identity import AuthError, Principal, Role
from memwarden.keys import Purpose
from memwarden.stores.audit import Pseudonymizer
from memwarden.stores.sources import SourceRegistry
from memwarden.stores.sql import SqlStore


@dataclass
class ApiState:
    settings: Settings
    store: SqlStore
    temporal: Client
    sources: SourceRegistry | None = None
    """Systems of record (sources.toml): which system principal may post events for which source."""

    @cached_property
    def subject_key(self) -> bytes:
        """The key person ids are hashed under (receipts, audit pseudonyms, deletions): derived once."""
        return subject_key(self.settings.auth_secret_value)

    @cached_property
    def handle_key(self) -> bytes:
        """The key subject handles are named under: their names are in history, so they must not match audit's."""
        return self.settings.key_for(Purpose.SUBJECT_HANDLES)

    @cached_property
    def pseudonyms(self) -> Pseudonymizer:
        """People as the audit log names them, the scheme the store applies to every event."""
        return Pseudonymizer(self.subject_key)


async def get_state(request: Request) -> ApiState:
    # async on purpose: FastAPI runs a plain `def` dependency in its thread pool, a hop per request.
    return request.app.state.mw  # type: ignore[no-any-return]


State = Annotated[ApiState, Depends(get_state)]

_UNAUTHORIZED = {"WWW-Authenticate": "Bearer"}


def get_principal(request: Request, state: ApiState) -> Principal:
    """The verified bearer token's principal (callable directly, e.g. by the codec routes)."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Problem(401, "unauthorized", "a bearer token is required", field="Authorization", headers=_UNAUTHORIZED)
    try:
        return state.settings.token_verifier.verify(token.strip())
    except AuthError:
        raise Problem(
            401, "invalid_token", "the bearer token is invalid or expired", field="Authorization", headers=_UNAUTHORIZED
        ) from None


async def caller_principal(request: Request, state: State) -> Principal:
    """The `Caller` dependency: async, so FastAPI does not run it in its thread pool (a hop per request)."""
    return get_principal(request, state)


Caller = Annotated[Principal, Depends(caller_principal)]


def require_roles(principal: Principal, *roles: Role) -> None:
    if principal.role not in roles:
        raise Problem(403, "forbidden_role", f"role {principal.role.value} may not do this")
