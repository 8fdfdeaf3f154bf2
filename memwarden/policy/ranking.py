"""Pure ranking for Retrieve: fuse BM25 and dense scores, apply a relevance floor, then recency and importance.

Why score fusion and not rank fusion: a relevance floor needs real scores (a rank says nothing
about whether the best hit is any good), and on LoCoMo (bench/locomo.py) a weighted sum of the
dense cosine and the max-normalised BM25 score beat reciprocal rank fusion clearly (R@5 .59 vs
.48 on categories 1-4), because RRF lets a weak retriever's noise outvote a strong one.

The order is the design's: relevance first (the floor removes what is not about the query at all),
then conversation context (`contextual`: neighbouring turns and the session), then a lift for what
the person the query names said (`names_speaker`), then recency decay and importance adjust among
what is relevant. They are multiplicative and
bounded, so an old, unimportant memory that matches well still beats a new one that barely does.

No I/O and no clock: `now` is passed in, so the workflow sandbox can import this module.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime

from pydantic import BaseModel, Field

RELATIVE_FLOOR = 0.5
"""The second half of the relevance floor: relative to the best hit.

Why relative, and on which score: the absolute floor (`min_cosine`, `min_bm25`) only asks whether a
memory is about the query at all, and on a small store nearly everything is (a memory that shares the
word "user" with the query passes it). What the query is about is what its best hit is about, so a hit
is returned only while its relevance (fused, in its conversation context, after the speaker lift; never
recency or importance, which order what is relevant but do not make anything relevant) is at least this
share of the best one's. Chosen on LoCoMo conversations 0-4 (`bench/locomo.py` sweeps it; the figures,
precision beside recall, are in docs/benchmarks.md): the largest share of the sweep at which recall@5
there does not fall at all. The next step up already costs recall, and a share that high also drops
hits a query plainly touches when the best hit is withheld (a stale memory on a high-consequence read).
"""


class RankingParams(BaseModel):
    """Every knob of the ranking, with the defaults tuned on LoCoMo (see README, Retrieval)."""

    model_config = {"frozen": True}

    dense_weight: float = Field(default=0.4, ge=0.0)
    sparse_weight: float = Field(default=0.6, ge=0.0)
    min_cosine: float = Field(default=0.2, ge=-1.0, le=1.0)
    """A hit with no keyword match must be at least this similar to the query to be relevant at all."""
    min_bm25: float = Field(default=1.0, ge=0.0)
    """A keyword match counts toward relevance only from this raw BM25 score (a rare term, or several)."""
    recency_weight: float = Field(default=0.1, ge=0.0, le=1.0)
    """How much of the score recency can take away: at most 10% for a very old memory."""
    recency_half_life_days: float = Field(default=90.0, gt=0.0)
    importance_weight: float = Field(default=0.1, ge=0.0, le=1.0)
    """How much of the score low importance can take away: at most 10% at importance 0."""
    neighbour_weight: float = Field(default=0.2, ge=0.0)
    """Conversation context: each relevant turn within `neighbour_window` of a candidate in the same
    session adds this share of its relevance (0 turns the neighbour context off)."""
    neighbour_window: int = Field(default=2, ge=0, le=10)
    previous_turn_factor: float = Field(default=1.5, ge=0.0)
    """Earlier turns count this much more than later ones: a question is asked before its answer."""
    session_weight: float = Field(default=0.8, ge=0.0)
    """Conversation context: this share of the best relevance in the candidate's session is added
    (the session the query is about lifts its other turns; 0 turns it off)."""
    speaker_weight: float = Field(default=0.4, ge=0.0)
    """A turn said by someone the query names ("what did Nate ...") ranks this much higher, relative to
    the rest, after the conversation context (0 turns it off)."""
    relative_floor: float = Field(default=RELATIVE_FLOOR, ge=0.0, le=1.0)
    """A hit whose relevance is below this share of the best hit's is not returned (0 turns it off)."""


DEFAULT_PARAMS = RankingParams()


@dataclass(frozen=True)
class Relevance:
    """One candidate's relevance evidence from the two retrievers (None: that retriever did not find it)."""

    memory_id: str
    cosine: float | None
    bm25: float | None


@dataclass(frozen=True)
class Candidate:
    """What ranking needs of an eligible memory: its relevance and the store's metadata (no content).

    `session` and `turn` come from the memory's provenance: memories written from one conversation
    session share a session key (qualify it by owner, e.g. with `session_key`), and `turn` is the
    position in it (`turn_position`); either may be None, and then no context applies to it.
    """

    relevance: Relevance
    created_at: datetime
    importance: float
    last_confirmed_at: datetime | None = None
    session: str | None = None
    turn: int | None = None
    speaker_named: bool = False
    """The query names the person who said this memory (provenance `speaker`; see `names_speaker`)."""


@dataclass(frozen=True)
class Ranked:
    memory_id: str
    score: float
    relevance: float


def merge(dense: list[tuple[str, float]], sparse: list[tuple[str, float]]) -> list[Relevance]:
    """Join the two retrievers' (id, score) lists by id; the order is first-seen (dense, then sparse)."""
    cos = dict(dense)
    bm = dict(sparse)
    ids = list(dict.fromkeys([i for i, _ in dense] + [i for i, _ in sparse]))
    return [Relevance(memory_id=i, cosine=cos.get(i), bm25=bm.get(i)) for i in ids]


def passes_floor(rel: Relevance, params: RankingParams = DEFAULT_PARAMS) -> bool:
    """Relevant at all: similar enough in meaning, or a real keyword match. Ranking only sees these."""
    if rel.cosine is not None and rel.cosine >= params.min_cosine:
        return True
    return rel.bm25 is not None and rel.bm25 >= params.min_bm25


def fused(relevances: list[Relevance], params: RankingParams = DEFAULT_PARAMS) -> dict[str, float]:
    """Weighted sum of the cosine (clamped at 0) and the BM25 score divided by the best BM25 score here.

    BM25 has no fixed scale (it grows with query length and term rarity), hence the normalisation
    by the best candidate; the cosine is already on a fixed scale and is used as it is.
    """
    total = params.dense_weight + params.sparse_weight
    if total <= 0:
        raise ValueError("dense_weight + sparse_weight must be > 0")
    best_bm25 = max((r.bm25 for r in relevances if r.bm25 is not None), default=0.0)
    out: dict[str, float] = {}
    for r in relevances:
        dense = max(r.cosine, 0.0) if r.cosine is not None else 0.0
        sparse = (r.bm25 / best_bm25) if (r.bm25 is not None and best_bm25 > 0) else 0.0
        out[r.memory_id] = (params.dense_weight * dense + params.sparse_weight * sparse) / total
    return out


_TRAILING_NUMBER = re.compile(r"(\d{1,9})\s*$")


def turn_position(turn: str | None) -> int | None:
    """A turn's position in its session: the number its provenance `turn` ends with ("D3:12" -> 12,
    "12" -> 12); None when it ends with none (such a memory gets no neighbour context)."""
    if not turn:
        return None
    found = _TRAILING_NUMBER.search(turn)
    return int(found.group(1)) if found else None


def session_key(owner_id: str, session: str | None) -> str | None:
    """Sessions are per person: two people's "session_1" are different conversations."""
    return None if not session else f"{owner_id}\x1f{session}"


_WORD = re.compile(r"\w+")


def query_words(query: str) -> str:
    """The query's words, casefolded and space-delimited at both ends, for `names_speaker`."""
    return " " + " ".join(_WORD.findall(query.casefold())) + " "


def names_speaker(words: str, speaker: str | None) -> bool:
    """Whether the query (as `query_words`) names this speaker: all of the speaker's words, in order,
    as whole words ("Nate" in "what did nate's team win?" yes, in "senate" no).

    Why: a question about a person is mostly answered by what that person said; on LoCoMo 95% of
    the evidence turns are spoken by the person the question names, while BM25 counts the name as one
    more common word (it is in half of the conversation's turns) and the embedder hardly at all.
    """
    if not speaker:
        return False
    spoken = " ".join(_WORD.findall(speaker.casefold()))
    return bool(spoken) and f" {spoken} " in words


def contextual(candidates: list[Candidate], scores: dict[str, float], params: RankingParams) -> dict[str, float]:
    """Relevance in its conversation context, scaled back into 0..1.

    Why: a memory is often the answer to a question asked in the turn before it, or part of a
    session that is about the query as a whole; alone it may share few words with the query (the
    single turn "we went camping" answers "what did Mel do in the summer?" asked a turn earlier).
    So each candidate gains `neighbour_weight` x the relevance of every relevant turn up to
    `neighbour_window` turns away in the same session (earlier ones x `previous_turn_factor`), and
    `session_weight` x the best relevance in its session (a memory from no session is a session of
    one, so it is never worse off than a lone turn). Only relevant candidates lend context (nothing
    below the floor, nothing the principal may not read), and each one's own relevance still
    counts most. On LoCoMo this lifted recall@5 from .587 to .666 (README, Retrieval).
    """
    by_turn: dict[tuple[str, int], float] = {}
    best_in_session: dict[str, float] = {}
    for c in candidates:
        rel = scores[c.relevance.memory_id]
        if c.session is None:
            continue
        best_in_session[c.session] = max(best_in_session.get(c.session, 0.0), rel)
        if c.turn is not None:
            key = (c.session, c.turn)
            by_turn[key] = max(by_turn.get(key, 0.0), rel)
    w = params.neighbour_window
    scale = 1.0 + params.neighbour_weight * w * (1.0 + params.previous_turn_factor) + params.session_weight
    out: dict[str, float] = {}
    for c in candidates:
        rel = scores[c.relevance.memory_id]
        if c.session is None:  # a session of one: it is its own best, with no neighbours
            out[c.relevance.memory_id] = rel * (1.0 + params.session_weight) / scale
            continue
        near = 0.0
        if c.turn is not None and params.neighbour_weight > 0:
            for d in range(1, w + 1):
                near += params.previous_turn_factor * by_turn.get((c.session, c.turn - d), 0.0)
                near += by_turn.get((c.session, c.turn + d), 0.0)
        lifted = rel + params.neighbour_weight * near + params.session_weight * best_in_session[c.session]
        out[c.relevance.memory_id] = lifted / scale
    return out


def recency(created_at: datetime, now: datetime, half_life_days: float, confirmed_at: datetime | None = None) -> float:
    """1.0 for a memory confirmed or written now, halving every `half_life_days` (never below 0)."""
    latest = max(created_at, confirmed_at) if confirmed_at is not None else created_at
    age_days = max((now - latest).total_seconds(), 0.0) / 86400.0
    return math.pow(0.5, age_days / half_life_days)


def rank(candidates: list[Candidate], now: datetime, k: int, params: RankingParams = DEFAULT_PARAMS) -> list[Ranked]:
    """Floor, fuse, add conversation context, lift what the person the query names said, drop what is far
    below the best hit (`relative_floor`), then adjust by recency and importance; the best `k`, ties
    broken by id (stable). Fewer than `k` when fewer are relevant.

    Fusion normalises over the candidates that passed the floor, so a junk keyword match does not
    set the BM25 scale for the rest.
    """
    if k < 1:
        return []
    relevant = [c for c in candidates if passes_floor(c.relevance, params)]
    scores = fused([c.relevance for c in relevant], params)
    in_context = contextual(relevant, scores, params)
    ranked: list[Ranked] = []
    lift = 1.0 + params.speaker_weight
    for c in relevant:
        rel = in_context[c.relevance.memory_id]
        rel = rel if c.speaker_named else rel / lift  # still within 0..1
        fresh = recency(c.created_at, now, params.recency_half_life_days, c.last_confirmed_at)
        importance = min(max(c.importance, 0.0), 1.0)
        factor = (1.0 - params.recency_weight + params.recency_weight * fresh) * (
            1.0 - params.importance_weight + params.importance_weight * importance
        )
        ranked.append(Ranked(memory_id=c.relevance.memory_id, score=rel * factor, relevance=rel))
    best = max((r.relevance for r in ranked), default=0.0)
    ranked = [r for r in ranked if r.relevance >= params.relative_floor * best]
    ranked.sort(key=lambda r: (-r.score, r.memory_id))
    return ranked[:k]
