"""How much a candidate is worth remembering, when the caller did not say: a small additive rule set.

Deterministic and explainable on purpose (an audit reader can recompute it): a base by memory type,
plus adjustments for why it is proposed (the write reason), who says so (the source), whether it fills a
named slot, and its length. It sees features only, never the content, so it may run inside a workflow.

    score = clamp(TYPE_BASE[type] + REASON_ADJUST[reason] + SOURCE_ADJUST[source]
                  + SLOT_BONUS (if slot) + BEHAVIOUR_BONUS (if behaviour-changing) + length adjustment, 0, 1)

Examples (recommended reject threshold 0.30): a stated user preference scores 0.85, a stated user fact
0.75, an app-observed episode 0.35, an unverified tool episode 0.25 (rejected), a ten-character
user-stated episode ("ok thanks!") 0.40, the same from an app 0.20 (rejected).
"""

from __future__ import annotations

from memwarden.records import MemoryType, Screening, SourceKind, WriteReason

TYPE_BASE: dict[MemoryType, float] = {
    MemoryType.PREFERENCE: 0.60,
    MemoryType.PROCEDURAL: 0.60,
    MemoryType.FACT: 0.55,
    MemoryType.SUMMARY: 0.50,
    MemoryType.TASK: 0.45,
    MemoryType.EPISODIC: 0.35,
}
"""Durable knowledge about the person outranks task state, which outranks a passing episode."""

REASON_ADJUST: dict[str, float] = {
    WriteReason.USER_EXPLICIT_PREFERENCE.value: 0.20,
    WriteReason.OPERATOR_APPROVED_UPDATE.value: 0.20,
    WriteReason.USER_STATED_FACT.value: 0.15,
    WriteReason.TASK_OUTCOME.value: 0.05,
    WriteReason.APP_OBSERVATION.value: 0.0,
    WriteReason.DERIVED_SUMMARY.value: 0.0,
    WriteReason.TOOL_OBSERVATION_UNVERIFIED.value: -0.05,
}
UNKNOWN_REASON_ADJUST = -0.10
"""A reason the table does not know (a configured custom one) earns no credit."""

SOURCE_ADJUST: dict[SourceKind, float] = {
    SourceKind.USER: 0.05,
    SourceKind.SYSTEM: 0.05,
    SourceKind.APP: 0.0,
    SourceKind.MODEL: -0.05,
    SourceKind.TOOL: -0.05,
    SourceKind.DOCUMENT: -0.20,
}

SLOT_BONUS = 0.05
"""A candidate that names a slot ("user.city") is about a known attribute: likely to be asked for again."""

BEHAVIOUR_BONUS = 0.05
"""Standing instructions ("always answer in French") matter on every future turn."""

SHORT_CHARS = 12
SHORT_PENALTY = -0.15
"""Under 12 characters there is rarely a memory in it ("ok", "thanks!")."""
TERSE_CHARS = 24
TERSE_PENALTY = -0.05
LONG_CHARS = 1000
LONG_PENALTY = -0.05
"""A very long candidate is usually a transcript dump rather than one memory."""


def score_importance(
    *,
    memory_type: MemoryType,
    reason: str,
    source_kind: SourceKind,
    content_chars: int,
    has_slot: bool = False,
    screening: Screening | None = None,
) -> float:
    """Importance in [0, 1], rounded to 3 decimals so replays and audit records compare exactly."""
    score = TYPE_BASE[memory_type]
    score += REASON_ADJUST.get(reason, UNKNOWN_REASON_ADJUST)
    score += SOURCE_ADJUST[source_kind]
    if has_slot:
        score += SLOT_BONUS
    if screening is not None and screening.behaviour_changing:
        score += BEHAVIOUR_BONUS
    if content_chars < SHORT_CHARS:
        score += SHORT_PENALTY
    elif content_chars < TERSE_CHARS:
        score += TERSE_PENALTY
    elif content_chars > LONG_CHARS:
        score += LONG_PENALTY
    return round(min(1.0, max(0.0, score)), 3)
