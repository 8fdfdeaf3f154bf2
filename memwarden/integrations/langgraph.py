"""A LangGraph `BaseStore` over memwarden's HTTP API: every put is a proposal to the gate.

    store = MemwardenStore("http://127.0.0.1:8080", token)   # an agent's token (on_behalf_of, stores)
    graph = builder.compile(store=store)

Namespaces name memwarden's scopes (docs/decisions/langgraph-store-mapping.md); the token, never the
namespace, decides whose memory it is:

| namespace | memwarden |
|---|---|
| `("user", *path)` | the user the token serves (user scope) |
| `("agent", *path)` | the agent's private store about that user (agent scope) |
| `("shared", store, *path)` | the shared store `store` (the token must be a member) |

`path` and the key become the memory's slot (one live value per slot, so a second put to a key
supersedes the first); the value is the memory's content, as canonical JSON, screened whole. A put the
gate does not store raises (`MemoryRejected`, `MemoryPending`, `MemoryDuplicate` from
`memwarden.integrations.outcomes`); a delete is a forget (`aforget` returns the deletion id).

The semantics of a batch follow LangGraph's `InMemoryStore`: its reads see the state before the batch,
and its puts, the last one per key, are applied in order after them (the first put the gate refuses
raises; the puts before it took effect, the ones after it were not sent).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import threading
from collections.abc import Coroutine, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        InvalidNamespaceError,
        Item,
        ListNamespacesOp,
        MatchCondition,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        validate_op_namespace,
    )
except ImportError as error:  # pragma: no cover - exercised in a subprocess without langgraph
    raise ImportError("memwarden.integrations.langgraph needs LangGraph: pip install 'memwarden[langgraph]'") from error

from memwarden.client import SearchHit
from memwarden.integrations.outcomes import MemoryInvalid, MemwardenIntegrationError, raise_for_decision
from memwarden.integrations.service import Service

__all__ = ["Forgotten", "LabelledItem", "MemwardenStore", "decode_slot", "encode_slot"]

T = TypeVar("T")

SLOT_PREFIX = "lg"
"""Marks the slots this store writes, so memories written another way are not mistaken for items."""

SLOT_MAX = 128
"""memwarden's slot length limit (`CandidateIn.slot`)."""

_PLAIN = re.compile(r"[A-Za-z0-9_-]")
_STORE_NAME = re.compile(r"^[A-Za-z0-9_:-]{1,128}$")
ROOTS = ("user", "agent", "shared")

SEARCH_K = 50
"""The most hits one memwarden search returns; a query search filters and pages within them."""


def _escape(component: str) -> str:
    return "".join(c if _PLAIN.fullmatch(c) else "".join(f":{b:02X}" for b in c.encode()) for c in component)


def _unescape(text: str) -> str:
    out = bytearray()
    i = 0
    while i < len(text):
        if text[i] == ":":
            out.append(int(text[i + 1 : i + 3], 16))
            i += 3
        else:
            out.extend(text[i].encode())
            i += 1
    return out.decode()


def encode_slot(path: Sequence[str], key: str) -> str:
    """`lg.<path...>.<key>`, each part escaped to memwarden's slot alphabet; reversible (`decode_slot`)."""
    slot = ".".join([SLOT_PREFIX, *(_escape(p) for p in path), _escape(key)])
    if len(slot) > SLOT_MAX:
        raise MemoryInvalid(
            "slot_too_long", f"namespace and key make a slot of {len(slot)} characters (at most {SLOT_MAX})", ["key"]
        )
    return slot


def decode_slot(slot: str | None) -> tuple[tuple[str, ...], str] | None:
    """The (path, key) a slot of this store's encodes; None for any other slot."""
    if not slot or not slot.startswith(SLOT_PREFIX + "."):
        return None
    parts = slot.split(".")[1:]
    try:
        return tuple(_unescape(p) for p in parts[:-1]), _unescape(parts[-1])
    except (ValueError, UnicodeDecodeError):
        return None


@dataclass(frozen=True)
class Target:
    """Where a namespace lives in memwarden: a scope, a shared store's name, and the path in it."""

    scope: str
    store: str | None
    path: tuple[str, ...]

    def namespace(self) -> tuple[str, ...]:
        return (self.scope, self.store, *self.path) if self.store is not None else (self.scope, *self.path)


def target_of(namespace: tuple[str, ...]) -> Target:
    """The scope a namespace names, or InvalidNamespaceError saying which roots there are."""
    if not namespace or namespace[0] not in ROOTS:
        raise InvalidNamespaceError(
            f"a memwarden namespace starts with one of {', '.join(ROOTS)} (the scope); got {namespace!r}"
        )
    if namespace[0] != "shared":
        return Target(namespace[0], None, tuple(namespace[1:]))
    if len(namespace) < 2 or not _STORE_NAME.fullmatch(namespace[1]):
        raise InvalidNamespaceError(
            f"a shared namespace is ('shared', store, ...), store [A-Za-z0-9_:-]; got {namespace!r}"
        )
    return Target("shared", namespace[1], tuple(namespace[2:]))


def _target_of_memory(memory: dict[str, Any], path: tuple[str, ...]) -> Target | None:
    scope = memory.get("scope")
    if scope == "shared":
        store = memory.get("store")
        return Target("shared", store, path) if isinstance(store, str) else None
    return Target(scope, None, path) if scope in ("user", "agent") else None


def canonical(value: Any) -> str:
    """The content a value is stored as: JSON, keys sorted, no whitespace, so one value is one text."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _value_of(content: str | None) -> dict[str, Any]:
    try:
        value = json.loads(content or "")
    except ValueError:
        return {"content": content}
    return value if isinstance(value, dict) else {"content": content}


@dataclass(frozen=True)
class Current:
    """One item as memwarden holds it now: the live memory in its slot."""

    memory_id: str
    content: str
    item: Item


@dataclass(frozen=True)
class Forgotten:
    """A delete as memwarden recorded it: follow `deletion_id` (GET /v1/deletions/{id}) to the receipt."""

    memory_id: str
    deletion_id: str
    status: str


class _Loop:
    """A private event loop on a daemon thread: `batch` and `abatch` both run there, on one HTTP client."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="memwarden-store", daemon=True)
        self.thread.start()

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        if threading.current_thread() is self.thread:
            coro.close()
            raise RuntimeError("MemwardenStore was called from its own loop")
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


class MemwardenStore(BaseStore):
    """LangGraph's long-term memory store, decided by memwarden under the caller's token.

    `memory_type`, `source_kind` and `reason` are what every put proposes (the defaults: an
    application's observation stored as a fact; `source_kind="user"`, `reason="user_stated_fact"`
    for a graph relaying what its user said). `ttl` (minutes, LangGraph's unit) becomes `ttl_seconds`
    counted from the write; reads do not refresh it, which `ttl_config` says (`refresh_on_read` False).
    """

    supports_ttl: bool = True

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        memory_type: str = "fact",
        source_kind: str = "app",
        reason: str = "app_observation",
        importance: float | None = None,
        sensitivity: str | None = None,
        default_ttl_minutes: float | None = None,
        timeout: float = 30.0,
    ) -> None:
        self._base_url = base_url
        self._token = token
        self._timeout = timeout
        self._proposal: dict[str, Any] = {"type": memory_type, "source_kind": source_kind, "reason": reason}
        if importance is not None:
            self._proposal["importance"] = importance
        if sensitivity is not None:
            self._proposal["sensitivity"] = sensitivity
        self.ttl_config = TTLConfig(refresh_on_read=False, default_ttl=default_ttl_minutes)
        self._loop: _Loop | None = None
        self._service: Service | None = None
        self._lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------------------------

    def _runner(self) -> _Loop:
        with self._lock:
            if self._loop is None:
                self._loop = _Loop()
            return self._loop

    def _svc(self) -> Service:
        if self._service is None:  # created on the private loop, so its connections belong to it
            self._service = Service(self._base_url, self._token, timeout=self._timeout)
        return self._service

    def close(self) -> None:
        """Close the HTTP client and stop the private loop (the store is unusable afterwards)."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is None:
            return
        if self._service is not None:
            asyncio.run_coroutine_threadsafe(self._service.close(), loop.loop).result(10)
            self._service = None
        loop.stop()

    def __enter__(self) -> MemwardenStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- BaseStore -------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        return self._runner().submit(self._batch(list(ops))).result()

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.wrap_future(self._runner().submit(self._batch(list(ops))))

    async def aforget(self, namespace: tuple[str, ...], key: str) -> Forgotten | None:
        """Delete an item and say how: the deletion memwarden started (None when the key held nothing)."""
        return await asyncio.wrap_future(self._runner().submit(self._forget_one(tuple(namespace), str(key))))

    def forget(self, namespace: tuple[str, ...], key: str) -> Forgotten | None:
        """`aforget`, from synchronous code."""
        return self._runner().submit(self._forget_one(tuple(namespace), str(key))).result()

    async def adeletion(self, deletion_id: str) -> dict[str, Any]:
        """The deletion's receipt as memwarden reports it (status: tombstoned, purging, verified, failed)."""
        return await asyncio.wrap_future(self._runner().submit(self._svc().deletion(deletion_id)))

    # --- the work, on the private loop -----------------------------------------------------------

    async def _snapshot(self) -> dict[tuple[tuple[str, ...], str], Current]:
        """Every item the token may read now, by (namespace, key), from the live memories' listing."""
        held: dict[tuple[tuple[str, ...], str], Current] = {}
        async for memory in self._svc().live_memories():
            decoded = decode_slot(memory.get("slot"))
            if decoded is None or memory.get("content") is None:
                continue
            path, key = decoded
            target = _target_of_memory(memory, path)
            if target is None:
                continue
            namespace = target.namespace()
            if (namespace, key) in held:  # newest first: an older row of the same key is not current
                continue
            item = Item(
                value=_value_of(memory["content"]),
                key=key,
                namespace=namespace,
                created_at=datetime.fromisoformat(memory["created_at"]),
                updated_at=datetime.fromisoformat(memory["updated_at"]),
            )
            held[(namespace, key)] = Current(memory["id"], memory["content"], item)
        return held

    async def _batch(self, ops: list[Op]) -> list[Result]:
        for op in ops:
            validate_op_namespace(op)
            if isinstance(op, PutOp):
                _validate_put_namespace(op.namespace)
        held = await self._snapshot() if ops else {}
        results: list[Result] = []
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                current = held.get((tuple(op.namespace), op.key))
                results.append(current.item if current else None)
            elif isinstance(op, SearchOp):
                results.append(await self._search(op, held))
            elif isinstance(op, ListNamespacesOp):
                results.append(_list_namespaces(op, held))
            elif isinstance(op, PutOp):
                puts[(tuple(op.namespace), op.key)] = op
                results.append(None)
            else:
                raise ValueError(f"Unknown operation type: {type(op)}")
        for (namespace, key), put in puts.items():
            if put.value is None:
                await self._forget(held.get((namespace, key)))
            else:
                await self._put(namespace, key, put, held.get((namespace, key)))
        return results

    async def _put(self, namespace: tuple[str, ...], key: str, op: PutOp, current: Current | None) -> None:
        target = target_of(namespace)
        content = canonical(dict(op.value or {}))
        fields: dict[str, Any] = dict(self._proposal)
        fields["slot"] = encode_slot(target.path, key)
        fields["scope"] = target.scope
        if target.store is not None:
            fields["store"] = target.store
        if op.ttl is not None:
            fields["ttl_seconds"] = max(1, math.ceil(op.ttl * 60))
        answer = await self._svc().remember(content, **fields)
        held_already = current is not None and current.content == content
        raise_for_decision(answer, current_id=current.memory_id if held_already else None)

    async def _forget(self, current: Current | None) -> Forgotten | None:
        if current is None:
            return None  # LangGraph's delete of a missing key is silent
        try:
            answer = await self._svc().delete(current.memory_id)
        except MemwardenIntegrationError as error:
            if error.code == "not_found":  # forgotten by someone else since the listing: gone either way
                return None
            raise
        return Forgotten(current.memory_id, str(answer["deletion_id"]), str(answer["status"]))

    async def _forget_one(self, namespace: tuple[str, ...], key: str) -> Forgotten | None:
        _validate_put_namespace(namespace)
        held = await self._snapshot()
        return await self._forget(held.get((namespace, key)))

    async def _search(self, op: SearchOp, held: dict[tuple[tuple[str, ...], str], Current]) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        ranked: list[tuple[Current, SearchHit | None]]
        if op.query:
            answer = await self._svc().search(op.query, k=SEARCH_K)
            by_id = {c.memory_id: c for c in held.values()}
            ranked = [(by_id[h.memory_id], h) for h in answer.results if h.memory_id in by_id]
        else:  # newest first, as the listing (and LangGraph's PostgresStore) orders them
            ranked = [(c, None) for c in held.values()]
        found = [
            (c, hit)
            for c, hit in ranked
            if c.item.namespace[: len(prefix)] == prefix and _matches(c.item.value, op.filter)
        ]
        return [
            LabelledItem(c.item, hit) if hit is not None else _search_item(c.item)
            for c, hit in found[op.offset : op.offset + op.limit]
        ]


def _search_item(item: Item, score: float | None = None) -> SearchItem:
    return SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at, score)


class LabelledItem(SearchItem):
    """A query search's item: LangGraph's `SearchItem`, plus memwarden's `label` (the line that says,
    in a prompt, that this is remembered data and where it came from) and `freshness`."""

    __slots__ = ("freshness", "label")

    def __init__(self, item: Item, hit: SearchHit) -> None:
        super().__init__(item.namespace, item.key, item.value, item.created_at, item.updated_at, hit.score)
        self.label = hit.label
        self.freshness = str(hit.freshness)


def _validate_put_namespace(namespace: tuple[str, ...]) -> None:
    """LangGraph's own rules for a written namespace (non-empty, no `langgraph` root), then memwarden's."""
    if not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    if namespace[0] == "langgraph":
        raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {namespace}')
    target_of(tuple(namespace))


def _list_namespaces(op: ListNamespacesOp, held: dict[tuple[tuple[str, ...], str], Current]) -> list[tuple[str, ...]]:
    namespaces = {namespace for namespace, _ in held}
    if op.match_conditions:
        namespaces = {ns for ns in namespaces if all(_does_match(c, ns) for c in op.match_conditions)}
    if op.max_depth is not None:
        namespaces = {ns[: op.max_depth] for ns in namespaces}
    return sorted(namespaces)[op.offset : op.offset + op.limit]


def _does_match(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = condition.path
    if len(namespace) < len(path):
        return False
    pairs = (
        zip(namespace, path, strict=False)
        if condition.match_type == "prefix"
        else zip(reversed(namespace), reversed(path), strict=False)
    )
    return all(p == "*" or n == p for n, p in pairs)


def _matches(value: dict[str, Any], filter: dict[str, Any] | None) -> bool:
    """LangGraph's filter language (exact values, nested dicts, `$eq $ne $gt $gte $lt $lte`)."""
    return all(_compare(value.get(k), v) for k, v in (filter or {}).items())


def _compare(item: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(item, k, v) for k, v in wanted.items())
        return isinstance(item, dict) and all(_compare(item.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(item, list | tuple)
            and len(item) == len(wanted)
            and all(_compare(i, w) for i, w in zip(item, wanted, strict=False))
        )
    return bool(item == wanted)


def _operator(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if operator in ("$gt", "$gte", "$lt", "$lte"):
        if value is None:
            return False
        a, b = float(value), float(operand)
        return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[operator]
    raise ValueError(f"Unsupported operator: {operator}")
