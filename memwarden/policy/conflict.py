"""When sources disagree about one fact: the designated system of record, then trusted provenance,
then newer evidence (ARCHITECTURE.md, Revalidate).

A claim is one value's standing, not the value: which system vouches for it, whether that system is
the designated system of record for the fact, how the value was learned (source kind) and when it was
last observed true. Revalidation builds one claim for the memory as held and one for what the source
answers, and the winner decides whether the answer supersedes the memory. Pure and deterministic; a
full tie keeps the first claim (the value already held), so equal evidence never flaps a fact.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from memwarden.records import SourceKind

PROVENANCE_TRUST: dict[SourceKind, int] = {
    SourceKind.USER: 5,
    SourceKind.SYSTEM: 4,
    SourceKind.APP: 3,
    SourceKind.DOCUMENT: 2,
    SourceKind.TOOL: 1,
    SourceKind.MODEL: 0,
}
"""What the person said outranks a system that is not the record's owner; inferences rank last."""


@dataclass(frozen=True)
class Claim:
    """One value's standing in a disagreement (ids and codes only)."""

    label: str
    """Who holds it, for the audit trail: `memory` or `source:<system>`."""
    source_kind: SourceKind
    designated: bool
    """Vouched for by the designated system of record for this fact."""
    observed_at: datetime


def rank(claim: Claim) -> tuple[bool, int, datetime]:
    return (claim.designated, PROVENANCE_TRUST[claim.source_kind], claim.observed_at)


def resolve(claims: list[Claim]) -> Claim:
    """The claim that wins: designated first, then the more trusted provenance, then the newer evidence.

    Ties keep the earlier claim in the list (put the value already held first).
    """
    if not claims:
        raise ValueError("resolve needs at least one claim")
    best = claims[0]
    for claim in claims[1:]:
        if rank(claim) > rank(best):
            best = claim
    return best
