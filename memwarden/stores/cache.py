"""The search-result cache: one async protocol, an in-process adapter and a Redis adapter.

The cache is a derivative of the durable store, so two rules shape it:
- keys carry no content: every part is a sha256 hex digest, so a key listing (or a Redis
  `SCAN`) reveals nothing a user said;
- keys are laid out so that everything an owner's memories may have fed is under one prefix,
  making invalidation after a write, and purging during Forget, a single `delete_prefix`, and
  `keys_with_prefix` the verification that nothing is left.

Key scheme (before the adapter's own namespace):

    search:<sha256(tenant)>:<sha256(owner)>:<principal digest>:<query digest>

where owner is the person (or the agent-self owner) whose searches these are: see `search_owner`
and `invalidation_prefixes`.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from memwarden.config import CacheBackend
from memwarden.identity import Principal, agent_self_owner
from memwarden.records import Scope

if TYPE_CHECKING:
    from memwarden.config import Settings

DEFAULT_MAX_ENTRIES = 10_000
"""In-process bound: enough for a busy embedded node, small enough to never matter for memory."""

_SCAN_BATCH = 500
_NO_OWNER = "-"


@runtime_checkable
class Cache(Protocol):
    """What the retrieve path and the Forget fan-out need from a cache, whatever the backend."""

    async def get(self, key: str) -> bytes | None:
        """The value, or None when absent or expired."""
        ...

    async def set(self, key: str, value: bytes, ttl_seconds: int) -> None:
        """Store a value that disappears after `ttl_seconds` (> 0): TTL bounds staleness, never validity."""
        ...

    async def delete(self, keys: list[str]) -> None:
        """Remove these keys; absent keys are fine (idempotent, for retried activities)."""
        ...

    async def delete_prefix(self, prefix: str) -> int:
        """Remove every key starting with `prefix`; returns how many were removed."""
        ...

    async def keys_with_prefix(self, prefix: str) -> list[str]:
        """Live keys starting with `prefix`: Forget's proof that a purge left nothing."""
        ...

    async def health(self) -> bool:
        """True when the backend answers; never raises."""
        ...

    async def close(self) -> None:
        """Release connections (or memory); the cache is unusable afterwards."""
        ...


def _check_ttl(ttl_seconds: int) -> None:
    if ttl_seconds <= 0:
        raise ValueError("ttl_seconds must be > 0")


class MemoryCache:
    """In-process cache for the embedded profile: a bounded LRU with per-entry expiry.

    Operations never await while holding the lock, so they are atomic under asyncio; the lock is
    a threading lock so the same instance is also safe across event loops or threads in one process.
    Expiry is measured on `clock` (monotonic seconds): the real one by default, one a test advances
    so that a TTL lapses without waiting it out.
    """

    def __init__(self, max_entries: int = DEFAULT_MAX_ENTRIES, *, clock: Callable[[], float] = time.monotonic) -> None:
        if max_entries <= 0:
            raise ValueError("max_entries must be > 0")
        self.max_entries = max_entries
        self._clock = clock
        self._data: OrderedDict[str, tuple[float, bytes]] = OrderedDict()
        self._lock = threading.Lock()
        self._closed = False

    def __len__(self) -> int:
        """Entries held, including expired ones not yet reclaimed."""
        return len(self._data)

    async def get(self, key: str) -> bytes | None:
        now = self._clock()
        with self._lock:
            entry = self._data.get(key)
            if entry is None:
                return None
            expires_at, value = entry
            if expires_at <= now:
                del self._data[key]
                return None
            self._data.move_to_end(key)
            return value

    async def set(self, key: str, value: bytes, ttl_seconds: int) -> None:
        _check_ttl(ttl_seconds)
        expires_at = self._clock() + ttl_seconds
        with self._lock:
            self._data[key] = (expires_at, bytes(value))
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)

    async def delete(self, keys: list[str]) -> None:
        with self._lock:
            for key in keys:
                self._data.pop(key, None)

    async def delete_prefix(self, prefix: str) -> int:
        now = self._clock()
        with self._lock:
            doomed = [k for k in self._data if k.startswith(prefix)]
            live = 0
            for key in doomed:
                expires_at, _ = self._data.pop(key)
                live += expires_at > now
            return live

    async def keys_with_prefix(self, prefix: str) -> list[str]:
        now = self._clock()
        with self._lock:
            return [k for k, (expires_at, _) in self._data.items() if k.startswith(prefix) and expires_at > now]

    async def health(self) -> bool:
        return not self._closed

    async def close(self) -> None:
        with self._lock:
            self._data.clear()
            self._closed = True


def _glob_escape(text: str) -> str:
    """Escape Redis glob metacharacters so a prefix matches literally."""
    return "".join("\\" + ch if ch in "*?[]\\" else ch for ch in text)


class RedisCache:
    """Redis adapter for the production profile; every key lives under `<namespace>:`.

    Prefix deletion walks `SCAN` and removes in `UNLINK` batches: never `KEYS`, which blocks the
    server for the whole keyspace.
    """

    def __init__(self, url: str, namespace: str = "mw", *, timeout_seconds: float = 2.0) -> None:
        if not namespace or ":" in namespace:
            raise ValueError("namespace must be non-empty and contain no ':'")
        self.namespace = namespace
        self._ns = f"{namespace}:"
        self._redis: aioredis.Redis = aioredis.Redis.from_url(
            url,
            decode_responses=False,
            socket_timeout=timeout_seconds,
            socket_connect_timeout=timeout_seconds,
        )

    def _full(self, key: str) -> str:
        return self._ns + key

    async def get(self, key: str) -> bytes | None:
        value = await self._redis.get(self._full(key))
        return None if value is None else bytes(value)

    async def set(self, key: str, value: bytes, ttl_seconds: int) -> None:
        _check_ttl(ttl_seconds)
        await self._redis.set(self._full(key), value, ex=ttl_seconds)

    async def delete(self, keys: list[str]) -> None:
        for start in range(0, len(keys), _SCAN_BATCH):
            batch = [self._full(k) for k in keys[start : start + _SCAN_BATCH]]
            await self._redis.unlink(*batch)

    async def _scan(self, prefix: str) -> AsyncIterator[bytes]:
        pattern = _glob_escape(self._full(prefix)) + "*"
        async for raw in self._redis.scan_iter(match=pattern, count=_SCAN_BATCH):
            yield raw

    async def delete_prefix(self, prefix: str) -> int:
        removed = 0
        batch: list[bytes] = []
        async for raw in self._scan(prefix):
            batch.append(raw)
            if len(batch) >= _SCAN_BATCH:
                removed += int(await self._redis.unlink(*batch))
                batch = []
        if batch:
            removed += int(await self._redis.unlink(*batch))
        return removed

    async def keys_with_prefix(self, prefix: str) -> list[str]:
        cut = len(self._ns)
        found = {bytes(raw).decode()[cut:] async for raw in self._scan(prefix)}
        return sorted(found)

    async def health(self) -> bool:
        try:
            return bool(await self._redis.ping())
        except (RedisError, OSError):
            return False

    async def close(self) -> None:
        await self._redis.aclose()


def open_cache(settings: Settings, *, max_entries: int = DEFAULT_MAX_ENTRIES) -> Cache:
    """The cache the profile asks for: in-process (embedded) or Redis (production)."""
    if settings.cache_backend is CacheBackend.REDIS:
        return RedisCache(settings.redis_url, settings.redis_namespace)
    return MemoryCache(max_entries=max_entries)


# --- key scheme -----------------------------------------------------------------------------


def digest(text: str) -> str:
    """sha256 hex of a text: the only form in which ids or query text may appear in a key."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _canonical_digest(value: object) -> str:
    return digest(json.dumps(value, sort_keys=True, separators=(",", ":"), default=str))


def principal_digest(principal: Principal) -> str:
    """Digest of everything that decides what a principal may see, so two principals never share an entry."""
    return _canonical_digest(
        {
            "tenant": principal.tenant,
            "sub": principal.sub,
            "role": principal.role.value,
            "agent": principal.agent,
            "on_behalf_of": principal.on_behalf_of,
            "stores": sorted(principal.stores),
        }
    )


def query_digest(**parts: object) -> str:
    """Digest of a search request (query text, k, types, sensitivity, ...): order-independent."""
    return _canonical_digest(parts)


def _is_digest(value: str) -> bool:
    return len(value) == 64 and all(c in "0123456789abcdef" for c in value)


def search_owner(principal: Principal) -> str | None:
    """The owner partition a principal's searches are cached under.

    A user's own id; an agent's user (on whose behalf it acts) or, serving no user, its agent-self
    owner; None for roles that read no content through search (they should not cache searches).
    """
    owner = principal.subject_owner
    if owner is None and principal.agent:
        return agent_self_owner(principal.agent)
    return owner


def tenant_prefix(tenant_id: str) -> str:
    """Every cached search of a tenant."""
    return f"search:{digest(tenant_id)}:"


def owner_prefix(tenant_id: str, owner_id: str | None) -> str:
    """Every cached search in one owner partition of a tenant (see `search_owner`)."""
    return f"{tenant_prefix(tenant_id)}{digest(owner_id) if owner_id is not None else _NO_OWNER}:"


def search_key(tenant_id: str, owner_id: str | None, principal_digest: str, query_digest: str) -> str:
    """The key for one principal's one search; both digests must be sha256 hex (no content in keys)."""
    if not (_is_digest(principal_digest) and _is_digest(query_digest)):
        raise ValueError("principal_digest and query_digest must be sha256 hex digests")
    return f"{owner_prefix(tenant_id, owner_id)}{principal_digest}:{query_digest}"


def invalidation_prefixes(tenant_id: str, scope: Scope, owner_id: str) -> list[str]:
    """Prefixes to drop when a memory in this namespace changes or is forgotten.

    A user- or agent-scoped memory about a person is visible only to searches in that person's
    partition. A shared-store memory, or an agent's memory about no user (visible to that agent
    whichever user it serves), may sit in any partition of the tenant, so the whole tenant goes.
    """
    if scope is Scope.SHARED or owner_id.startswith(agent_self_owner("")):
        return [tenant_prefix(tenant_id)]
    return [owner_prefix(tenant_id, owner_id)]
