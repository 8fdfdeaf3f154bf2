"""Retrieve, the service: authorize, gather, re-check and rank candidates, then revalidate at read.

Remember's write gate lives in `memwarden.services.remember`; nothing here stores a memory. The
`search_memories` activity (`activities.memory`) is the adapter; the API loads content after its own
check and writes the read's audit event (api/routes/search.py).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from memwarden.errors import CandidateGone
from memwarden.policy import ranking
from memwarden.records import (
    Consequence,
    Hit,
    ReadFilter,
    RetrieveInput,
    RetrieveResult,
    Status,
)
from memwarden.services.deps import Deps
from memwarden.services.revalidate import RevalidateService
from memwarden.services.run import Run
from memwarden.stores.sql import EligibleMeta
from memwarden.stores.subjects import handle_ids

CANDIDATE_FACTOR = 4
MIN_CANDIDATES = 100
"""Each retriever offers max(4k, 100) candidates (`MEMWARDEN_SEARCH_CANDIDATES`): fusion needs depth
(the best BM25 hit sets the scale), and conversation context needs a turn's neighbours among them."""


def candidate_depth(k: int, minimum: int = MIN_CANDIDATES) -> int:
    return max(k * CANDIDATE_FACTOR, minimum)


@dataclass(frozen=True)
class Gathered:
    """A search's candidates, ranked, with what the store's re-check said of each (ids, never content)."""

    ranked: list[ranking.Ranked]
    meta: dict[str, EligibleMeta]


class RetrieveService:
    """Bound to one worker's Deps."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.revalidator = RevalidateService(deps)

    async def _embed(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self.deps.embedder.embed, texts)

    async def search(self, request: RetrieveInput, run: Run) -> RetrieveResult:
        """Authorize before rank: both retrievers run with the read filter inside their queries, every
        candidate is re-checked against the durable store (the index may lag a tombstone; the store
        never does), and only then ranked: relevance floor, fusion, recency and importance.

        Returns ids and scores only; content stays in the store (the API loads it after its own check).
        """
        if request.k < 1:
            raise ValueError("k must be >= 1")
        query, request = await self._parked(request)
        [dense] = await self._embed([query])
        gathered = await self._gather_for(query, dense, request.read_filter, request.k)
        now = self.deps.clock()
        ranked, meta = gathered.ranked, gathered.meta
        hits: list[Hit] = []
        spare: list[Hit] = []
        withheld: list[dict[str, str]] = []
        for r in ranked:
            if len(spare) == request.k:
                break
            m = meta[r.memory_id]
            if request.consequence is Consequence.HIGH and m.status is Status.STALE and m.source_system is None:
                # A stale memory is not a basis for a consequential action (one with a source is checked there).
                if len(hits) < request.k:
                    withheld.append({"memory_id": r.memory_id, "reason": "stale"})
                continue
            (hits if len(hits) < request.k else spare).append(Hit(memory_id=r.memory_id, score=round(r.score, 6)))
        # Read-time revalidation (Revalidate): the hits the freshness policy names are checked at their
        # sources within each source's timeout; spare hits replace any that drop out.
        return await self.revalidator.at_read(request, hits, withheld, spare, meta, now, run)

    async def _parked(self, request: RetrieveInput) -> tuple[str, RetrieveInput]:
        """The query (the API parked it before starting the workflow) and the request with its real read
        filter (which waits under the subject handle: history holds one without clauses), read in one
        statement."""
        refs = [r for r in (request.query_ref, request.subject_ref) if r is not None]
        parked = await self.deps.store.get_candidates(refs) if refs else {}
        if request.subject_ref is not None:
            ids = handle_ids(request.subject_ref, parked.get(request.subject_ref))
            if ids is None:
                raise CandidateGone(request.subject_ref)
            request = request.model_copy(update={"read_filter": ReadFilter.model_validate(ids["read_filter"])})
        query = request.query
        if request.query_ref is not None:
            query = parked.get(request.query_ref)
            if query is None:
                raise CandidateGone(request.query_ref)
        return query or "", request

    async def _gather_for(self, query: str, dense: list[float], read_filter: ReadFilter, k: int) -> Gathered:
        """Both retrievers under the read filter, the store's re-check of every candidate, then ranking."""
        now = self.deps.clock()
        found = await self.deps.index.hybrid(
            dense=dense,
            text=query,
            read_filter=read_filter,
            now_ts=now.timestamp(),
            limit=candidate_depth(k, self.deps.settings.search_candidates),
        )
        params = self.deps.settings.ranking()
        # Ranking only ever sees candidates that pass the relevance floor: the rest are not worth re-checking.
        relevances = [
            r
            for r in ranking.merge(
                [(h.memory_id, h.score) for h in found.dense], [(h.memory_id, h.score) for h in found.sparse]
            )
            if ranking.passes_floor(r, params)
        ]
        meta = await self.deps.store.eligible_meta(read_filter, [r.memory_id for r in relevances], now)
        words = ranking.query_words(query)
        named = {s: ranking.names_speaker(words, s) for s in {m.speaker for m in meta.values()} if s}
        candidates = [
            ranking.Candidate(
                relevance=rel,
                created_at=meta[rel.memory_id].created_at,
                importance=meta[rel.memory_id].importance,
                last_confirmed_at=meta[rel.memory_id].last_confirmed_at,
                session=ranking.session_key(meta[rel.memory_id].owner_id, meta[rel.memory_id].session),
                turn=ranking.turn_position(meta[rel.memory_id].turn),
                speaker_named=named.get(meta[rel.memory_id].speaker or "", False),
            )
            for rel in relevances
            if rel.memory_id in meta
        ]
        return Gathered(ranking.rank(candidates, now, len(candidates), params), meta)
