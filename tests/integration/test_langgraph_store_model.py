"""`MemwardenStore` against a plain in-memory reference model, over seeded random batches of operations.

Every batch runs on both; every read's answer is compared. The reference is LangGraph's semantics as
`InMemoryStore` has them (a batch's reads see the state before it; its puts, the last one per key, are
applied after them), written out here as a dict so its own quirks (a `get` of an unknown namespace
makes it appear in `list_namespaces`) are not taken for the contract.

Where memwarden's gate or its authorization changes an outcome, the operation runs alone in its batch,
the test names the exception and the reason it expects, and the reference does not change:

- a value holding a secret: `MemoryRejected("secret_detected")` (never stored, whatever the key held);
- a put into a shared store: `MemoryPending("staged_shared_store")` (a moderator must confirm it);
- a delete of the user's own memory by the agent: `MemoryForbidden("not_own_store")` (the person forgets it);
- a key the instruction detector reads as a directive: `MemoryPending("staged_instruction")`. The key is
  part of the slot, a free-text field every detector screens, and the slot `lg.trips.plan` reads as the
  directive "plan" (the `field_directive` signal), so the person must confirm it.

Two more differences are part of the reference, not exceptions: a put of the value the key already
holds is memwarden's NOOP, so the item keeps its place in the newest-first order; and a query search
returns what memwarden ranks relevant (a subset of the matching items, never another item).

Values are built so the gate cannot take a changed value for the one it replaces (each carries a
number no other value has, which dedupe's value-conflict veto always sees), and from words no
detector flags (the keys included). Seeds are fixed (`SEEDS`); a failure prints the seed and the batch.
"""

from __future__ import annotations

import asyncio
import os
import random
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, Op, PutOp, SearchOp

from memwarden.integrations.langgraph import MemwardenStore, _matches
from memwarden.integrations.outcomes import (
    MemoryForbidden,
    MemoryPending,
    MemoryRejected,
    MemwardenIntegrationError,
)
from tests.integration.api_stack import Api

SEEDS = tuple(int(s) for s in os.environ.get("MEMWARDEN_MODEL_SEEDS", "1,2,3").split(","))
"""Fixed, so a failure reproduces; `MEMWARDEN_MODEL_SEEDS=4,5,6` explores others."""
BATCHES = 18

NAMESPACES = [("user", "profile"), ("user", "profile", "work"), ("user",), ("agent", "notes"), ("agent", "notes", "o")]
KEYS = ["colour", "itinerary", "key with spaces", "clé", "a:b"]
PREFIXES = [(), ("user",), ("agent",), ("user", "profile"), ("agent", "notes"), ("shared",)]
TOPICS = ["pressure", "rainfall", "voltage", "altitude", "humidity", "salinity"]
SECRET = "the deploy key is AKIAZ7QXW3SYNTH5EXMP"

Key = tuple[tuple[str, ...], str]


@dataclass
class Model:
    """The reference: items by (namespace, key), and the write order that ranks them newest first."""

    items: dict[Key, dict[str, Any]] = field(default_factory=dict)
    written: dict[Key, int] = field(default_factory=dict)
    clock: int = 0

    def batch(self, ops: list[Op]) -> list[Any]:
        results: list[Any] = []
        puts: dict[Key, PutOp] = {}
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self.items.get((op.namespace, op.key)))
            elif isinstance(op, SearchOp):
                results.append(self.search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self.namespaces(op))
            elif isinstance(op, PutOp):
                puts[(op.namespace, op.key)] = op
                results.append(None)
        for key, put in puts.items():
            if put.value is None:
                self.items.pop(key, None)
                self.written.pop(key, None)
            elif self.items.get(key) != put.value:  # the same value again is a NOOP: nothing moves
                self.clock += 1
                self.items[key] = dict(put.value)
                self.written[key] = self.clock
        return results

    def matching(self, prefix: tuple[str, ...], filter: dict[str, Any] | None) -> list[Key]:
        keys = [k for k in self.items if k[0][: len(prefix)] == prefix and _matches(self.items[k], filter)]
        return sorted(keys, key=lambda k: -self.written[k])

    def search(self, op: SearchOp) -> list[Key]:
        return self.matching(op.namespace_prefix, op.filter)[op.offset : op.offset + op.limit]

    def namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        from memwarden.integrations.langgraph import _does_match

        found = {ns for ns, _ in self.items}
        found = {ns for ns in found if all(_does_match(c, ns) for c in op.match_conditions or ())}
        if op.max_depth is not None:
            found = {ns[: op.max_depth] for ns in found}
        return sorted(found)[op.offset : op.offset + op.limit]


class Ops:
    """Random operations from one seed."""

    def __init__(self, seed: int, model: Model) -> None:
        self.rng = random.Random(seed)
        self.model = model
        self.number = 100

    def value(self) -> dict[str, Any]:
        self.number += self.rng.randint(1, 7)
        topic = self.rng.choice(TOPICS)
        return {"text": f"The {topic} reading is {self.number} units", "topic": topic, "n": self.number}

    def filter(self) -> dict[str, Any] | None:
        roll = self.rng.random()
        if roll < 0.5:
            return None
        if roll < 0.75:
            return {"topic": self.rng.choice(TOPICS)}
        return {"n": {self.rng.choice(["$gt", "$lte"]): self.rng.randint(100, self.number + 1)}}

    def op(self) -> Op:
        rng = self.rng
        roll = rng.random()
        if roll < 0.40:
            return PutOp(rng.choice(NAMESPACES), rng.choice(KEYS), self.value())
        if roll < 0.46 and self.model.items:
            key = rng.choice(sorted(self.model.items))
            return PutOp(key[0], key[1], self.model.items[key])  # the value it holds already
        if roll < 0.56:
            agent_keys = sorted(k for k in self.model.items if k[0][0] == "agent")
            if agent_keys and rng.random() < 0.7:
                return PutOp(*rng.choice(agent_keys), None)
            return PutOp(("agent", "notes"), "gone", None)  # a key that holds nothing: silent
        if roll < 0.70:
            return GetOp(rng.choice(NAMESPACES), rng.choice(KEYS))
        if roll < 0.84:
            return SearchOp(
                rng.choice(PREFIXES), self.filter(), limit=rng.choice([2, 5, 100]), offset=rng.choice([0, 0, 1, 3])
            )
        if roll < 0.90:
            return SearchOp(rng.choice(PREFIXES), None, limit=10, query=f"{rng.choice(TOPICS)} reading")
        conditions = []
        if rng.random() < 0.5:
            conditions.append(MatchCondition("prefix", rng.choice([("user",), ("agent", "*"), ("user", "profile")])))
        if rng.random() < 0.3:
            conditions.append(MatchCondition("suffix", rng.choice([("work",), ("notes",), ("*",)])))
        return ListNamespacesOp(tuple(conditions), max_depth=rng.choice([None, 1, 2]), limit=rng.choice([2, 100]))

    def gated(self, turn: int) -> tuple[Op, type[Exception], str]:
        """One operation whose outcome the gate or the token decides (run alone), each kind in turn."""
        kind = turn % 4
        user_keys = sorted(k for k in self.model.items if k[0][0] == "user")
        if kind == 1:
            key = f"k{uuid.uuid4().hex[:6]}"  # its own slot: one pending write per slot
            return PutOp(("shared", "team"), key, self.value()), MemoryPending, "staged_shared_store"
        if kind == 2:
            namespace = ("user", "trips", f"t{uuid.uuid4().hex[:6]}")  # its own slot, as above
            return PutOp(namespace, "plan", self.value()), MemoryPending, "staged_instruction"
        if kind == 3:  # the first put of the test's loop gives it a user item when there is none yet
            namespace, key = self.rng.choice(user_keys) if user_keys else (("user", "profile"), "colour")
            return PutOp(namespace, key, None), MemoryForbidden, "not_own_store"
        secret = PutOp(self.rng.choice(NAMESPACES), self.rng.choice(KEYS), {"text": SECRET})
        return secret, MemoryRejected, "secret_detected"


def comparable(op: Op, mine: Any, model: Model, expected: Any) -> None:
    """Assert one read's answer against the reference (results are compared by namespace, key and value)."""
    if isinstance(op, GetOp):
        assert (mine.value if mine else None) == expected
        if mine:
            assert (mine.namespace, mine.key) == (op.namespace, op.key)
    elif isinstance(op, SearchOp) and op.query:
        allowed = {k: model.items[k] for k in model.matching(op.namespace_prefix, op.filter)}
        got = [(i.namespace, i.key) for i in mine]
        assert len(got) == len(set(got)) and len(got) <= op.limit
        for item in mine:  # only what memwarden ranks relevant, but never an item the model lacks
            assert allowed.get((item.namespace, item.key)) == item.value
            assert item.score is not None
    elif isinstance(op, SearchOp):
        assert [(i.namespace, i.key) for i in mine] == expected
        for item in mine:
            assert item.value == model.items[(item.namespace, item.key)]
    elif isinstance(op, ListNamespacesOp):
        assert mine == expected
    else:
        assert mine is None


@pytest.mark.parametrize("seed", SEEDS)
async def test_random_batches_agree_with_the_reference_model(api: Api, seed: int) -> None:
    t = f"t-{uuid.uuid4().hex[:10]}"
    token = api.token(t, "svc", role="agent", agent="planner", on_behalf_of="alice", stores=["team"])
    model = Model()
    ops = Ops(seed, model)
    gated: set[str] = set()
    with MemwardenStore(api.base_url, token) as store:
        for number in range(BATCHES):
            if number % 3 == 2:
                op, error, reason = ops.gated(number // 3)
                if reason == "not_own_store" and (op.namespace, op.key) not in model.items:
                    setup = [PutOp(op.namespace, op.key, ops.value())]
                    model.batch(setup)
                    await store.abatch(setup)
                with pytest.raises(error) as raised:
                    await store.abatch([op])
                assert raised.value.code == reason, f"seed {seed} batch {number}: {op}"
                gated.add(reason)
            batch = [ops.op() for _ in range(ops.rng.randint(1, 4))]
            before = Model(dict(model.items), dict(model.written), model.clock)
            expected = model.batch(batch)
            try:
                if ops.rng.random() < 0.3:
                    mine = await asyncio.to_thread(store.batch, batch)
                else:
                    mine = await store.abatch(batch)
            except MemwardenIntegrationError as error:  # none is expected here: say which batch and why
                failed = f"{type(error).__name__} {error.code}"
                raise AssertionError(f"seed {seed} batch {number}: {batch}\n{failed}") from error
            assert len(mine) == len(batch)
            for op, got, want in zip(batch, mine, expected, strict=True):
                try:
                    comparable(op, got, before, want)
                except AssertionError:
                    raise AssertionError(f"seed {seed} batch {number}: {batch}\n{op}\ngot {got}\nwant {want}") from None
        everything = await store.asearch((), limit=1000)
        assert {(i.namespace, i.key): i.value for i in everything} == model.items, f"seed {seed}"
        assert [(i.namespace, i.key) for i in everything] == model.matching((), None)
    assert gated == {"secret_detected", "staged_shared_store", "staged_instruction", "not_own_store"}, gated
