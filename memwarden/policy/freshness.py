"""Freshness: which revalidation mechanisms apply to a memory, and how a read labels or withholds it.

TTL is not validity. `expires_at` says when a memory stops being worth keeping (retention); whether
it is still *true* is judged here, from its system of record: read-time checks, a freshness window
since it was last confirmed, the source version (ETag / If-None-Match on every check), change
events, and a periodic schedule for volatile memories. Nothing in this module reads `expires_at`.

A memory without a `source_ref` has no system of record to ask, so none of the mechanisms apply:
it is `fresh` while active (what the person said stands until they correct it) and `stale` only
when the store says so. Pure: no clock (callers pass `now`), no I/O; importable from workflows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from memwarden.records import Consequence, Freshness, MemoryRecord, MemoryType, Status


class Trigger(StrEnum):
    """The ways a memory gets revalidated (ARCHITECTURE.md, Revalidate)."""

    READ_TIME = "read_time"
    """Checked at its source while the read waits (deadline: the source's timeout)."""
    WINDOW = "window"
    """Past its freshness window since `last_confirmed_at`: checked at the next read, whatever its consequence."""
    SOURCE_VERSION = "source_version"
    """Every check sends the recorded version (If-None-Match), so an unchanged record costs a 304."""
    EVENT = "event"
    """A change event from the source marks it stale (changed) or invalidated (deleted) at once."""
    PERIODIC = "periodic"
    """The periodic schedule re-checks it (volatile memories), reads or no reads."""


DEFAULT_WINDOW_SECONDS: dict[MemoryType, int | None] = {
    MemoryType.FACT: 86_400,
    MemoryType.TASK: 3_600,
    MemoryType.PREFERENCE: 30 * 86_400,
    MemoryType.PROCEDURAL: 30 * 86_400,
    MemoryType.EPISODIC: None,
    MemoryType.SUMMARY: None,
}
"""How long a source-backed memory counts as confirmed. Episodes and summaries record what happened:
the past does not go out of date (a source can still delete one: events and explicit checks apply)."""

READ_TIME_TYPES: frozenset[MemoryType] = frozenset(
    {MemoryType.FACT, MemoryType.TASK, MemoryType.PREFERENCE, MemoryType.PROCEDURAL}
)
"""Types a high-consequence read checks at the source every time (when they have one)."""

VOLATILE_TYPES: frozenset[MemoryType] = frozenset({MemoryType.TASK})
"""Types the periodic schedule re-checks even when their source is not marked volatile (task state moves)."""


@dataclass(frozen=True)
class FreshnessRule:
    """The mechanisms that apply to one memory under one read's consequence."""

    triggers: frozenset[Trigger]
    window_seconds: int | None


NO_SOURCE = FreshnessRule(triggers=frozenset(), window_seconds=None)


def rule(
    memory_type: MemoryType,
    consequence: Consequence,
    *,
    has_source: bool,
    volatile: bool = False,
    window_seconds: int | None = None,
) -> FreshnessRule:
    """Which of read-time, window, source version, event and periodic apply.

    `volatile` and `window_seconds` come from the memory's source (sources.toml); a source's window
    overrides the type's default (0: check at every read).
    """
    if not has_source:
        return NO_SOURCE
    triggers = {Trigger.SOURCE_VERSION, Trigger.EVENT}
    window = window_seconds if window_seconds is not None else DEFAULT_WINDOW_SECONDS.get(memory_type)
    if window is not None:
        triggers.add(Trigger.WINDOW)
    if consequence is Consequence.HIGH and memory_type in READ_TIME_TYPES:
        triggers.add(Trigger.READ_TIME)
    if volatile or memory_type in VOLATILE_TYPES:
        triggers.add(Trigger.PERIODIC)
    return FreshnessRule(triggers=frozenset(triggers), window_seconds=window)


def confirmed_at(last_confirmed_at: datetime | None, created_at: datetime) -> datetime:
    """When the memory was last known true: its confirmation, else its creation."""
    return last_confirmed_at or created_at


def window_passed(
    rule_: FreshnessRule, last_confirmed_at: datetime | None, created_at: datetime, now: datetime
) -> bool:
    if Trigger.WINDOW not in rule_.triggers or rule_.window_seconds is None:
        return False
    return (now - confirmed_at(last_confirmed_at, created_at)).total_seconds() >= rule_.window_seconds


def check_at_read(
    rule_: FreshnessRule, status: Status, last_confirmed_at: datetime | None, created_at: datetime, now: datetime
) -> bool:
    """Whether this read must ask the source before answering with this memory.

    Yes under read-time; yes past the freshness window; yes for a stale memory with a source (a change
    was announced and not fetched yet). Never because of `expires_at`.
    """
    if not rule_.triggers:
        return False
    if Trigger.READ_TIME in rule_.triggers or status is Status.STALE:
        return True
    return window_passed(rule_, last_confirmed_at, created_at, now)


class Fallback(StrEnum):
    """What a read does with a memory whose source gave no usable answer before the deadline."""

    UNVERIFIED = "unverified"
    """Returned, marked `unverified`, with its source and when it was last confirmed."""
    WITHHELD = "withheld"
    """Held back and listed in `withheld` with a reason."""


@dataclass(frozen=True)
class ReadFallback:
    action: Fallback
    reason: str | None = None


def on_deadline(consequence: Consequence, status: Status) -> ReadFallback:
    """The timeout fallback. High consequence: withheld (`source_unavailable`). Low: `unverified`, except
    a memory already stale, whose source announced a change: that value is known to be outdated, so it
    is never served as if it might be current (withheld `stale`)."""
    if consequence is Consequence.HIGH:
        return ReadFallback(Fallback.WITHHELD, "source_unavailable")
    if status is Status.STALE:
        return ReadFallback(Fallback.WITHHELD, "stale")
    return ReadFallback(Fallback.UNVERIFIED)


def read_freshness(record: MemoryRecord) -> Freshness:
    """Without a check at this read: `stale` for a memory the store holds as stale, `fresh` for an active one.

    A read-time check replaces this answer with `verified` or `unverified` (RetrieveResult.checks).
    """
    return Freshness.STALE if record.status is Status.STALE else Freshness.FRESH
