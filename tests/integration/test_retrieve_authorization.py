"""Property: no principal ever receives a memory outside its namespaces (hypothesis, real stores).

Random worlds of memories across two tenants, several owners, two agents, user / agent / shared
scopes, shared stores, types, sensitivities and statuses, some of them with an index that lags the
store (a tombstone the index has not heard of yet). A random principal asks a random question
through the Retrieve activity (`search_memories`: both retrievers filtered inside the index query,
then eligibility re-checked against the store), on SQLite with Qdrant Edge and with qdrant-client.

The oracle below is written from ARCHITECTURE.md's Identity rules and the README's "Who reads what",
not from `ReadFilter.admits`, so a bug in `identity.read_filter` is caught too.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from qdrant_client import AsyncQdrantClient

from activities.memory import MemoryActivities
from memwarden.config import Settings
from memwarden.embed import MiniLMEmbedder, default_embedder
from memwarden.identity import Principal, Role, read_filter
from memwarden.records import (
    SENSITIVITY_ORDER,
    Consequence,
    MemoryRecord,
    MemoryType,
    RetrieveInput,
    Scope,
    Sensitivity,
    SourceKind,
    Status,
    content_hash,
)
from memwarden.services.deps import Deps
from memwarden.stores.cache import MemoryCache
from memwarden.stores.sql import SqlStore
from memwarden.stores.vectors import VectorIndex, index_point
from memwarden.stores.vectors_edge import EdgeIndex
from memwarden.stores.vectors_qdrant import QdrantClientIndex

pytestmark = pytest.mark.filterwarnings("ignore:Payload indexes have no effect in the local Qdrant:UserWarning")

TEXTS = (
    "synthetic: prefers window seats on long flights",
    "synthetic: the standup moved to nine thirty",
    "synthetic: allergic to peanuts and shellfish",
    "synthetic: lives near the old harbour",
    "synthetic: the quarterly report is due on friday",
    "synthetic: plays the cello in a community orchestra",
    "synthetic: the team uses the blue deployment pipeline",
    "synthetic: likes strong black coffee in the morning",
)
USERS = ("alice", "bob", "carol")
AGENTS = ("planner", "scribe")
STORES = ("team-x", "team-y")
TENANT_SLOTS = ("home", "other")


@dataclass(frozen=True)
class Spec:
    """One memory of the random world, before it is written."""

    tenant: str
    owner: str
    scope: Scope
    agent: str | None
    store: str | None
    type: MemoryType
    sensitivity: Sensitivity
    store_status: Status
    index_lags: bool
    """The index still holds it as active although the store says otherwise (a lagging derivative)."""
    text: int


@st.composite
def specs(draw: st.DrawFn) -> Spec:
    scope = draw(st.sampled_from(list(Scope)))
    agent = draw(st.sampled_from(AGENTS)) if scope is Scope.AGENT else None
    owners = list(USERS) + ([f"agent:{agent}"] if agent else [])
    return Spec(
        tenant=draw(st.sampled_from(TENANT_SLOTS)),
        owner=draw(st.sampled_from(owners)),
        scope=scope,
        agent=agent,
        store=draw(st.sampled_from(STORES)) if scope is Scope.SHARED else None,
        type=draw(st.sampled_from(list(MemoryType))),
        sensitivity=draw(st.sampled_from(list(Sensitivity))),
        store_status=draw(
            st.sampled_from([Status.ACTIVE, Status.ACTIVE, Status.STALE, Status.TOMBSTONED, Status.SUPERSEDED])
        ),
        index_lags=draw(st.booleans()),
        text=draw(st.integers(0, len(TEXTS) - 1)),
    )


@st.composite
def principals(draw: st.DrawFn, tenant: str) -> Principal:
    role = draw(st.sampled_from([Role.USER, Role.AGENT, Role.OPERATOR]))
    stores = tuple(draw(st.lists(st.sampled_from(STORES), unique=True, max_size=2)))
    if role is Role.AGENT:
        return Principal(
            tenant=tenant,
            sub=f"svc-{draw(st.sampled_from(AGENTS))}",
            role=role,
            agent=draw(st.sampled_from(AGENTS)),
            on_behalf_of=draw(st.one_of(st.none(), st.sampled_from(USERS))),
            stores=stores,
        )
    return Principal(tenant=tenant, sub=draw(st.sampled_from(USERS)), role=role, stores=stores)


def may_read(p: Principal, s: Spec, tenant_of: dict[str, str]) -> bool:
    """The Identity rules, restated independently: which namespaces this principal may read."""
    if tenant_of[s.tenant] != p.tenant:
        return False
    if s.scope is Scope.SHARED:
        return p.role in (Role.USER, Role.AGENT) and s.store in p.stores
    if p.role is Role.USER:
        return s.owner == p.sub  # their user-scoped memories, and what agents keep about them
    if p.role is Role.AGENT:
        if s.scope is Scope.USER:
            return p.on_behalf_of is not None and s.owner == p.on_behalf_of
        return s.agent == p.agent and s.owner in {p.on_behalf_of, f"agent:{p.agent}"}
    return False  # operators, privacy officers, systems: no content through search


@dataclass
class World:
    deps: Deps
    activities: MemoryActivities
    vectors: dict[int, list[float]]


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return default_embedder()


@pytest.fixture(scope="module", params=["sqlite-edge", "sqlite-qdrant"])
async def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, embedder: MiniLMEmbedder
) -> AsyncIterator[World]:
    tmp = tmp_path_factory.mktemp(f"authz-{request.param}")
    store = await SqlStore.open(f"sqlite+aiosqlite:///{tmp / 'm.db'}")
    await store.migrate()
    index: VectorIndex
    if request.param == "sqlite-edge":
        index = EdgeIndex(Path(tmp) / "shard")
    else:
        index = QdrantClientIndex(AsyncQdrantClient(location=":memory:"), f"authz_{uuid.uuid4().hex[:8]}")
    await index.ensure()
    settings = Settings(data_dir=tmp)  # type: ignore[call-arg]
    deps = Deps(settings=settings, store=store, index=index, cache=MemoryCache(), embedder=embedder)
    vectors = dict(enumerate(embedder.embed(list(TEXTS))))
    try:
        yield World(deps=deps, activities=MemoryActivities(deps), vectors=vectors)
    finally:
        await index.close()
        await store.close()


async def write(world: World, spec: Spec, tenant: str, now: datetime) -> MemoryRecord:
    text = TEXTS[spec.text]
    record = MemoryRecord(
        id=str(uuid.uuid4()),
        tenant_id=tenant,
        owner_id=spec.owner,
        scope=spec.scope,
        agent_id=spec.agent,
        store=spec.store,
        type=spec.type,
        content=text,
        content_hash=content_hash(text),
        source_kind=SourceKind.USER,
        reason="user_stated_fact",
        sensitivity=spec.sensitivity,
        status=spec.store_status,
        created_at=now - timedelta(days=1),
        updated_at=now,
    )
    await world.deps.store.insert_memory(record)
    point = index_point(record, world.vectors[spec.text])
    if spec.index_lags or record.status in (Status.ACTIVE, Status.STALE):
        point = point.model_copy(update={"status": Status.ACTIVE if spec.index_lags else record.status})
        await world.deps.index.upsert([point])
    return record


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
async def test_no_principal_receives_a_memory_outside_its_namespaces(world: World, data: st.DataObject) -> None:
    run = uuid.uuid4().hex[:10]
    tenant_of = {slot: f"{slot}-{run}" for slot in TENANT_SLOTS}  # fresh tenants: examples never mix
    now = datetime.now(UTC)
    memories = data.draw(st.lists(specs(), min_size=4, max_size=24), label="world")
    written = [(spec, await write(world, spec, tenant_of[spec.tenant], now)) for spec in memories]
    principal = data.draw(principals(tenant_of["home"]), label="principal")
    # Filters mostly open, so namespace leaks have room to show; narrowed often enough to test them too.
    types = data.draw(
        st.one_of(st.none(), st.none(), st.lists(st.sampled_from(list(MemoryType)), min_size=1, unique=True)),
        label="types",
    )
    ceiling = data.draw(
        st.sampled_from([Sensitivity.RESTRICTED, Sensitivity.RESTRICTED, *Sensitivity]), label="max_sensitivity"
    )
    query = data.draw(st.integers(0, len(TEXTS) - 1), label="query")
    k = data.draw(st.integers(1, 50), label="k")
    consequence = data.draw(st.sampled_from(list(Consequence)))

    rf = read_filter(principal, types=tuple(types) if types else None, max_sensitivity=ceiling)
    result = await world.activities.search_memories(
        RetrieveInput(query=TEXTS[query], k=k, read_filter=rf, consequence=consequence, actor=principal.actor)
    )

    def allowed(spec: Spec) -> bool:
        return (
            may_read(principal, spec, tenant_of)
            and spec.store_status in (Status.ACTIVE, Status.STALE)
            and (types is None or spec.type in types)
            and SENSITIVITY_ORDER.index(spec.sensitivity) <= SENSITIVITY_ORDER.index(ceiling)
        )

    admitted = {r.id for spec, r in written if allowed(spec)}
    returned = [h.memory_id for h in result.hits]
    withheld = [w["memory_id"] for w in result.withheld]
    assert set(returned) <= admitted, "a memory outside the principal's namespaces was returned"
    assert set(withheld) <= admitted, "withheld ids must not reveal memories outside the namespaces"
    assert len(returned) <= k and len(set(returned)) == len(returned)
    if consequence is Consequence.HIGH:
        stale = {r.id for _, r in written if r.status is Status.STALE}
        assert not set(returned) & stale, "a stale memory was returned for a high-consequence read"
    # Not vacuous: a readable memory with exactly the query's text is always found.
    exact = {r.id for spec, r in written if r.id in admitted and spec.text == query}
    if exact:
        assert set(returned + withheld) & exact
