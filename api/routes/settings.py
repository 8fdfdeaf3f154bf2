"""`/v1/settings`: a person switches memory off (no writes, no reads) and on again; nothing is deleted."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Body

from api.problems import Problem
from api.schemas import SettingsIn, SettingsOut
from api.state import ApiState, Caller, State
from memwarden.identity import Principal, Role
from memwarden.records import Namespace, Scope, namespace_label
from memwarden.stores.audit import AuditEventIn

router = APIRouter(prefix="/v1/settings", tags=["settings"])


async def memory_enabled(state: ApiState, caller: Principal) -> bool:
    """Whether the person this caller acts for has memory on (callers acting for no one: True)."""
    owner = caller.subject_owner
    return True if owner is None else await state.store.get_settings(caller.tenant, owner)


def _owner(caller: Principal) -> str:
    if caller.role is not Role.USER:
        raise Problem(403, "forbidden_role", "only the person themself changes their memory settings")
    return caller.sub


@router.get("", response_model=SettingsOut)
async def get_settings(state: State, caller: Caller) -> SettingsOut:
    owner = _owner(caller)
    return SettingsOut(memory_enabled=await state.store.get_settings(caller.tenant, owner))


@router.put("", response_model=SettingsOut)
async def put_settings(state: State, caller: Caller, body: Annotated[SettingsIn, Body()]) -> SettingsOut:
    owner = _owner(caller)
    now = datetime.now(UTC)
    await state.store.put_settings(caller.tenant, owner, body.memory_enabled, now)
    await state.store.append_audit(
        AuditEventIn(
            at=now,
            tenant_id=caller.tenant,
            actor=caller.actor,
            operation="settings",
            namespace=namespace_label(Namespace(tenant_id=caller.tenant, scope=Scope.USER, owner_id=owner)),
            reason="memory_enabled" if body.memory_enabled else "memory_disabled",
        )
    )
    return SettingsOut(memory_enabled=body.memory_enabled)
