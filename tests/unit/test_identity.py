"""Tokens and the namespaces a principal may read or write."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memwarden.identity import (
    AuthError,
    Forbidden,
    Principal,
    Role,
    agent_self_owner,
    check_source_kind,
    mint_token,
    read_filter,
    verify_token,
    write_target,
)
from memwarden.records import Scope, SourceKind

SECRET = "s" * 48


def test_token_round_trip_carries_every_claim() -> None:
    token = mint_token(
        SECRET, tenant="t1", sub="svc", role="agent", agent="planner", on_behalf_of="alice", stores=["team"]
    )
    p = verify_token(token, SECRET)
    assert p == Principal(
        tenant="t1", sub="svc", role=Role.AGENT, agent="planner", on_behalf_of="alice", stores=("team",)
    )


def test_token_signed_with_another_secret_is_refused() -> None:
    token = mint_token("x" * 48, tenant="t1", sub="alice", role="user")
    with pytest.raises(AuthError):
        verify_token(token, SECRET)


def test_expired_token_is_refused() -> None:
    token = mint_token(SECRET, tenant="t1", sub="alice", role="user", ttl_seconds=10, now=1_000_000)
    with pytest.raises(AuthError):
        verify_token(token, SECRET)


def test_garbage_token_is_refused() -> None:
    with pytest.raises(AuthError):
        verify_token("not.a.jwt", SECRET)


def test_agent_token_needs_agent_claim() -> None:
    with pytest.raises(ValueError):
        mint_token(SECRET, tenant="t1", sub="svc", role="agent")


def test_user_reads_own_user_and_agent_memories_about_them() -> None:
    rf = read_filter(Principal(tenant="t1", sub="alice", role=Role.USER))
    scopes = {(c.scope, c.owner_ids) for c in rf.clauses}
    assert scopes == {(Scope.USER, ("alice",)), (Scope.AGENT, ("alice",))}


def test_agent_reads_served_user_and_own_store_only() -> None:
    p = Principal(tenant="t1", sub="svc", role=Role.AGENT, agent="planner", on_behalf_of="alice", stores=("team",))
    rf = read_filter(p)
    by_scope = {c.scope: c for c in rf.clauses}
    assert by_scope[Scope.USER].owner_ids == ("alice",)
    assert by_scope[Scope.AGENT].agent_id == "planner"
    assert set(by_scope[Scope.AGENT].owner_ids or ()) == {"alice", agent_self_owner("planner")}
    assert by_scope[Scope.SHARED].stores == ("team",)


@pytest.mark.parametrize("role", [Role.OPERATOR, Role.PRIVACY, Role.SYSTEM])
def test_non_content_roles_read_nothing(role: Role) -> None:
    assert read_filter(Principal(tenant="t1", sub="x", role=role)).clauses == ()


def test_write_targets() -> None:
    alice = Principal(tenant="t1", sub="alice", role=Role.USER, stores=("team",))
    assert write_target(alice, scope=Scope.USER, owner_id=None, store=None).owner_id == "alice"
    with pytest.raises(Forbidden, match="owner_mismatch"):
        write_target(alice, scope=Scope.USER, owner_id="bob", store=None)
    with pytest.raises(Forbidden, match="not_a_store_member"):
        write_target(alice, scope=Scope.SHARED, owner_id=None, store="other")
    assert write_target(alice, scope=Scope.SHARED, owner_id=None, store="team").store == "team"
    agent = Principal(tenant="t1", sub="svc", role=Role.AGENT, agent="planner", on_behalf_of="alice")
    t = write_target(agent, scope=Scope.AGENT, owner_id=None, store=None)
    assert (t.agent_id, t.owner_id) == ("planner", "alice")
    lone = Principal(tenant="t1", sub="svc", role=Role.AGENT, agent="planner")
    with pytest.raises(Forbidden, match="agent_serves_no_user"):
        write_target(lone, scope=Scope.USER, owner_id=None, store=None)
    with pytest.raises(Forbidden, match="role_cannot_write"):
        write_target(Principal(tenant="t1", sub="op", role=Role.OPERATOR), scope=Scope.USER, owner_id=None, store=None)
    hr = Principal(tenant="t1", sub="svc-hr", role=Role.SYSTEM)
    assert write_target(hr, scope=Scope.USER, owner_id="alice", store=None).owner_id == "alice"
    with pytest.raises(Forbidden, match="owner_required"):
        write_target(hr, scope=Scope.USER, owner_id=None, store=None)
    with pytest.raises(Forbidden, match="system_writes_user_scope"):
        write_target(hr, scope=Scope.AGENT, owner_id="alice", store=None)


def test_the_source_kinds_a_role_may_declare() -> None:
    """Trust comes from the token: only a system principal declares `system`, and it declares nothing else."""
    by_role = {
        role: Principal(tenant="t1", sub="x", role=role, agent="a" if role is Role.AGENT else None) for role in Role
    }
    for kind in SourceKind:
        for role in (Role.USER, Role.AGENT):
            if kind is SourceKind.SYSTEM:
                with pytest.raises(Forbidden, match="source_kind_not_allowed"):
                    check_source_kind(by_role[role], kind)
            else:
                check_source_kind(by_role[role], kind)
        if kind is SourceKind.SYSTEM:
            check_source_kind(by_role[Role.SYSTEM], kind)
        else:
            with pytest.raises(Forbidden, match="source_kind_not_allowed"):
                check_source_kind(by_role[Role.SYSTEM], kind)
        for role in (Role.OPERATOR, Role.PRIVACY):
            with pytest.raises(Forbidden, match="role_cannot_write"):
                check_source_kind(by_role[role], kind)


names = st.text(alphabet="abcxyz", min_size=1, max_size=3)


@given(tenant=names, sub=names, agent=names, obo=names, stores=st.lists(names, max_size=3))
def test_every_clause_stays_inside_the_tenant_and_the_principal(
    tenant: str, sub: str, agent: str, obo: str, stores: list[str]
) -> None:
    p = Principal(tenant=tenant, sub=sub, role=Role.AGENT, agent=agent, on_behalf_of=obo, stores=tuple(stores))
    rf = read_filter(p)
    assert rf.tenant_id == tenant
    for clause in rf.clauses:
        if clause.scope is Scope.AGENT:
            assert clause.agent_id == agent
        if clause.scope is Scope.USER:
            assert clause.owner_ids == (obo,)
        if clause.scope is Scope.SHARED:
            assert set(clause.stores or ()) <= set(stores)
