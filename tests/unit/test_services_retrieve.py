"""RetrieveService without Temporal: authorize before rank, re-check in the store, on the injected clock.

Real SQLite and Qdrant Edge under tmp_path, the real embedder. What the index offers is re-checked
against the store at the service's clock, so a memory that expires is gone from a search the moment the
injected clock passes its expiry, whatever the wall clock says.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from memwarden.errors import CandidateGone
from memwarden.identity import Principal, Role, read_filter
from memwarden.records import RetrieveInput
from memwarden.services.deps import Deps
from memwarden.services.retrieve import RetrieveService
from tests.services_support import FIXED, RUN, Clock, seed, service_deps, tenant


@pytest.fixture
async def deps(tmp_path: Path) -> AsyncIterator[Deps]:
    async with service_deps(tmp_path) as opened:
        yield opened


def asking(tenant_id: str, owner: str, query: str, *, k: int = 5, **fields: object) -> RetrieveInput:
    principal = Principal(tenant=tenant_id, sub=owner, role=Role.USER)
    return RetrieveInput(query=query, k=k, read_filter=read_filter(principal), actor=f"user:{owner}", **fields)


async def test_a_search_answers_only_the_readers_memories_best_first(deps: Deps) -> None:
    t = tenant()
    bike = await seed(deps, t, "alice", "synthetic: alice rides a green bicycle to work")
    tea = await seed(deps, t, "alice", "synthetic: alice drinks jasmine tea in the afternoon")
    bobs = await seed(deps, t, "bob", "synthetic: bob rides a green bicycle to work")
    other_tenant = await seed(deps, tenant(), "alice", "synthetic: alice rides a green bicycle to work")

    result = await RetrieveService(deps).search(asking(t, "alice", "which bicycle does alice ride"), RUN)
    ids = [h.memory_id for h in result.hits]
    assert ids[0] == bike.id
    assert bobs.id not in ids and other_tenant.id not in ids
    assert set(ids) <= {bike.id, tea.id}
    assert result.withheld == [] and result.checks == []


async def test_a_memory_leaves_search_when_the_injected_clock_passes_its_expiry(deps: Deps) -> None:
    t = tenant()
    lasting = await seed(deps, t, "alice", "synthetic: alice parks on level three of the garage")
    expiring = await seed(
        deps, t, "alice", "synthetic: alice parks on level two this week", expires_at=FIXED + timedelta(hours=1)
    )
    service = RetrieveService(deps)
    request = asking(t, "alice", "where does alice park")

    assert {h.memory_id for h in (await service.search(request, RUN)).hits} == {lasting.id, expiring.id}
    clock: Clock = deps.clock  # type: ignore[assignment]
    clock.advance(hours=2)
    assert {h.memory_id for h in (await service.search(request, RUN)).hits} == {lasting.id}


async def test_the_query_is_read_from_its_claim_check_and_a_gone_one_is_candidate_gone(deps: Deps) -> None:
    t = tenant()
    bike = await seed(deps, t, "alice", "synthetic: alice rides a green bicycle to work")
    await seed(deps, t, "alice", "synthetic: alice drinks jasmine tea in the afternoon")
    await deps.store.put_candidate("q-1", t, "which bicycle does alice ride", FIXED + timedelta(days=3650))
    service = RetrieveService(deps)

    parked = await service.search(asking(t, "alice", "", query_ref="q-1"), RUN)
    assert parked.hits[0].memory_id == bike.id
    with pytest.raises(CandidateGone):
        await service.search(asking(t, "alice", "", query_ref="q-missing"), RUN)


async def test_k_below_one_is_refused(deps: Deps) -> None:
    with pytest.raises(ValueError, match="k must be >= 1"):
        await RetrieveService(deps).search(asking(tenant(), "alice", "anything", k=0), RUN)
