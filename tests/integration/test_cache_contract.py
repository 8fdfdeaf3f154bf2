"""One contract for every Cache backend: in-process always, Redis when MEMWARDEN_TEST_REDIS_URL is set."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
import redis.asyncio as aioredis

from memwarden.config import CacheBackend, Settings
from memwarden.identity import Principal, Role
from memwarden.records import Scope
from memwarden.stores.cache import (
    Cache,
    MemoryCache,
    RedisCache,
    digest,
    invalidation_prefixes,
    open_cache,
    owner_prefix,
    principal_digest,
    query_digest,
    search_key,
    search_owner,
    tenant_prefix,
)

REDIS_URL = os.environ.get("MEMWARDEN_TEST_REDIS_URL")

Elapse = Callable[[float], Awaitable[None]]
"""Let this many seconds pass, as the cache under test sees time."""


class ManualClock:
    """Monotonic seconds that move only when the test moves them (MemoryCache's `clock`)."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(
    params=[
        "memory",
        pytest.param(
            "redis",
            marks=[
                pytest.mark.redis,
                pytest.mark.skipif(not REDIS_URL, reason="MEMWARDEN_TEST_REDIS_URL not set"),
            ],
        ),
    ]
)
async def cache(request: pytest.FixtureRequest, clock: ManualClock) -> AsyncIterator[Cache]:
    if request.param == "memory":
        mem = MemoryCache(max_entries=5000, clock=clock)
        yield mem
        await mem.close()
        return
    assert REDIS_URL is not None
    namespace = f"mwtest{uuid.uuid4().hex}"
    rc = RedisCache(REDIS_URL, namespace=namespace)
    try:
        yield rc
    finally:
        await rc.delete_prefix("")
        leftover = await rc.keys_with_prefix("")
        await rc.close()
        assert leftover == []


@pytest.fixture
async def elapse(cache: Cache, clock: ManualClock) -> AsyncIterator[Elapse]:
    """Time passing for the backend under test, without waiting for it.

    In process: the cache's clock moves. Redis keeps its own clock, so time passing is what it does
    to every key of the cache's namespace: the remaining TTL (PTTL) shrinks by that much, and a key
    whose TTL reaches zero is gone (PEXPIRE with a non-positive time deletes it, as expiry would).
    Keys without a TTL are untouched.
    """
    if isinstance(cache, MemoryCache):

        async def move_clock(seconds: float) -> None:
            clock.now += seconds

        yield move_clock
        return
    assert isinstance(cache, RedisCache) and REDIS_URL is not None
    raw: aioredis.Redis = aioredis.Redis.from_url(REDIS_URL)

    async def shorten_ttls(seconds: float) -> None:
        async for key in raw.scan_iter(match=f"{cache.namespace}:*"):
            left = await raw.pttl(key)
            if left >= 0:
                await raw.pexpire(key, left - round(seconds * 1000))

    try:
        yield shorten_ttls
    finally:
        await raw.aclose()


async def test_set_get_and_missing(cache: Cache) -> None:
    assert await cache.get("a") is None
    await cache.set("a", b"\x00one\xff", 60)
    assert await cache.get("a") == b"\x00one\xff"
    await cache.set("a", b"two", 60)
    assert await cache.get("a") == b"two"


async def test_ttl_expiry(cache: Cache, elapse: Elapse) -> None:
    await cache.set("short", b"v", 1)
    await cache.set("long", b"v", 60)
    assert await cache.get("short") == b"v"
    await elapse(0.5)
    assert await cache.get("short") == b"v", "not before its TTL"
    await elapse(0.6)
    assert await cache.get("short") is None
    assert await cache.keys_with_prefix("short") == []
    assert await cache.get("long") == b"v"


async def test_non_positive_ttl_rejected(cache: Cache) -> None:
    with pytest.raises(ValueError):
        await cache.set("k", b"v", 0)
    assert await cache.get("k") is None


async def test_delete_is_idempotent(cache: Cache) -> None:
    await cache.set("x", b"1", 60)
    await cache.set("y", b"2", 60)
    await cache.delete(["x", "never-set"])
    assert await cache.get("x") is None
    assert await cache.get("y") == b"2"
    await cache.delete(["x"])
    await cache.delete([])
    assert await cache.get("y") == b"2"


async def test_delete_prefix_leaves_other_prefixes(cache: Cache) -> None:
    for i in range(7):
        await cache.set(f"p:a:{i}", b"v", 60)
    await cache.set("p:ab:0", b"v", 60)
    await cache.set("p:b:0", b"v", 60)
    await cache.set("q:a:0", b"v", 60)
    assert await cache.delete_prefix("p:a:") == 7
    assert await cache.keys_with_prefix("p:a:") == []
    assert sorted(await cache.keys_with_prefix("p:")) == ["p:ab:0", "p:b:0"]
    assert await cache.get("q:a:0") == b"v"
    assert await cache.delete_prefix("p:a:") == 0


async def test_prefix_with_glob_characters_matches_literally(cache: Cache) -> None:
    await cache.set("g*:1", b"v", 60)
    await cache.set("g?:1", b"v", 60)
    await cache.set("gx:1", b"v", 60)
    assert await cache.keys_with_prefix("g*") == ["g*:1"]
    assert await cache.delete_prefix("g?") == 1
    assert sorted(await cache.keys_with_prefix("g")) == ["g*:1", "gx:1"]


async def test_keys_with_prefix(cache: Cache) -> None:
    assert await cache.keys_with_prefix("k:") == []
    await cache.set("k:1", b"v", 60)
    await cache.set("k:2", b"v", 60)
    await cache.set("j:1", b"v", 60)
    assert sorted(await cache.keys_with_prefix("k:")) == ["k:1", "k:2"]


async def test_delete_prefix_many_keys(cache: Cache) -> None:
    """More keys than one SCAN/UNLINK batch, to exercise batching."""
    for i in range(1200):
        await cache.set(f"bulk:{i}", b"v", 60)
    await cache.set("other", b"v", 60)
    assert await cache.delete_prefix("bulk:") == 1200
    assert await cache.keys_with_prefix("bulk:") == []
    assert await cache.get("other") == b"v"


async def test_health(cache: Cache) -> None:
    assert isinstance(cache, Cache)
    assert await cache.health() is True


async def test_search_keys_invalidate_by_owner(cache: Cache) -> None:
    user_u = Principal(tenant="t1", sub="u", role=Role.USER)
    agent_for_u = Principal(tenant="t1", sub="svc", role=Role.AGENT, agent="a", on_behalf_of="u")
    user_v = Principal(tenant="t1", sub="v", role=Role.USER)
    other_tenant_u = Principal(tenant="t2", sub="u", role=Role.USER)
    qd = query_digest(query="where do I live", k=5)
    keys = {
        p: search_key(p.tenant, search_owner(p), principal_digest(p), qd)
        for p in (user_u, agent_for_u, user_v, other_tenant_u)
    }
    for key in keys.values():
        await cache.set(key, b"ids", 60)
    (prefix,) = invalidation_prefixes("t1", Scope.USER, "u")
    assert prefix == owner_prefix("t1", "u")
    assert await cache.delete_prefix(prefix) == 2
    assert await cache.get(keys[user_u]) is None
    assert await cache.get(keys[agent_for_u]) is None
    assert await cache.get(keys[user_v]) == b"ids"
    assert await cache.get(keys[other_tenant_u]) == b"ids"
    assert await cache.delete_prefix(tenant_prefix("t1")) == 1
    assert await cache.get(keys[other_tenant_u]) == b"ids"


async def test_memory_cache_lru_bound() -> None:
    mem = MemoryCache(max_entries=3)
    for key in ("a", "b", "c"):
        await mem.set(key, key.encode(), 60)
    assert await mem.get("a") == b"a"  # a is now most recent; b is least recent
    await mem.set("d", b"d", 60)
    assert len(mem) == 3
    assert await mem.get("b") is None
    assert [await mem.get(k) for k in ("a", "c", "d")] == [b"a", b"c", b"d"]
    await mem.set("c", b"c2", 60)  # overwrite refreshes recency without growing
    await mem.set("e", b"e", 60)
    assert await mem.get("a") is None
    assert sorted(await mem.keys_with_prefix("")) == ["c", "d", "e"]


async def test_memory_cache_closed_is_unhealthy() -> None:
    mem = MemoryCache()
    await mem.set("k", b"v", 60)
    await mem.close()
    assert await mem.health() is False
    assert await mem.get("k") is None


async def test_redis_health_false_when_unreachable() -> None:
    rc = RedisCache("redis://127.0.0.1:1/0", namespace="mwdown", timeout_seconds=0.5)
    try:
        assert await rc.health() is False
    finally:
        await rc.close()


def test_keys_carry_no_content() -> None:
    principal = Principal(tenant="acme-corp", sub="alice@example.com", role=Role.USER)
    key = search_key(
        principal.tenant,
        search_owner(principal),
        principal_digest(principal),
        query_digest(query="my secret diagnosis"),
    )
    for text in ("acme", "alice", "example", "secret", "diagnosis"):
        assert text not in key
    assert digest("alice@example.com") in key
    with pytest.raises(ValueError):
        search_key("t", "u", "not-a-digest", query_digest(query="x"))
    with pytest.raises(ValueError):
        search_key("t", "u", principal_digest(principal), "my secret diagnosis")


def test_digests_distinguish_principals_and_queries() -> None:
    a = Principal(tenant="t", sub="s", role=Role.AGENT, agent="a", on_behalf_of="u", stores=("x", "y"))
    assert principal_digest(a) == principal_digest(a.model_copy(update={"stores": ("y", "x")}))
    assert principal_digest(a) != principal_digest(a.model_copy(update={"stores": ("x",)}))
    assert principal_digest(a) != principal_digest(a.model_copy(update={"on_behalf_of": "v"}))
    assert query_digest(query="q", k=5) == query_digest(k=5, query="q")
    assert query_digest(query="q", k=5) != query_digest(query="q", k=6)


def test_search_owner_and_invalidation_scope() -> None:
    assert search_owner(Principal(tenant="t", sub="u", role=Role.USER)) == "u"
    assert search_owner(Principal(tenant="t", sub="s", role=Role.AGENT, agent="a", on_behalf_of="u")) == "u"
    assert search_owner(Principal(tenant="t", sub="s", role=Role.AGENT, agent="a")) == "agent:a"
    assert search_owner(Principal(tenant="t", sub="op", role=Role.OPERATOR)) is None
    assert invalidation_prefixes("t", Scope.SHARED, "u") == [tenant_prefix("t")]
    assert invalidation_prefixes("t", Scope.AGENT, "agent:a") == [tenant_prefix("t")]
    assert invalidation_prefixes("t", Scope.AGENT, "u") == [owner_prefix("t", "u")]
    assert owner_prefix("t", None) != owner_prefix("t", "-")


async def test_open_cache_follows_settings() -> None:
    mem = open_cache(Settings(cache_backend=CacheBackend.MEMORY))
    assert isinstance(mem, MemoryCache)
    await mem.close()
    rc = open_cache(Settings(cache_backend=CacheBackend.REDIS, redis_url="redis://127.0.0.1:1/0"))
    assert isinstance(rc, RedisCache)
    assert rc.namespace == "mw"
    await rc.close()
