"""Expiry by memory type: how long a memory is kept before the retention path forgets it.

TTL is not validity (freshness is judged by sources and revalidation); this only answers "when does
this memory stop being worth keeping at all". Task state is short-lived, episodes fade, while
preferences, facts and procedures do not expire by age: they are superseded, revalidated or forgotten.

Pure: no clock is read here; the caller passes `created_at` (in a workflow, `workflow.now()`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from pydantic import BaseModel, ConfigDict, Field

from memwarden.records import MemoryType

DAY_SECONDS = 86_400

DEFAULT_TTL_DAYS: dict[MemoryType, int | None] = {
    MemoryType.TASK: 30,
    MemoryType.EPISODIC: 180,
    MemoryType.PREFERENCE: None,
    MemoryType.FACT: None,
    MemoryType.PROCEDURAL: None,
    MemoryType.SUMMARY: None,
}
"""Without a caller `ttl_seconds`: task state lasts a month, an episode half a year, the rest has no age limit."""

MAX_TTL_DAYS: dict[MemoryType, int | None] = {
    MemoryType.TASK: 365,
    MemoryType.EPISODIC: None,
    MemoryType.PREFERENCE: None,
    MemoryType.FACT: None,
    MemoryType.PROCEDURAL: None,
    MemoryType.SUMMARY: None,
}
"""A caller's `ttl_seconds` may shorten or lengthen the default but never exceed this cap (None: no cap)."""


class RetentionPolicy(BaseModel):
    """Per-type default and maximum lifetime, in days; serialisable so a workflow can carry it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    default_days: dict[MemoryType, int | None] = Field(default_factory=lambda: dict(DEFAULT_TTL_DAYS))
    max_days: dict[MemoryType, int | None] = Field(default_factory=lambda: dict(MAX_TTL_DAYS))


DEFAULT_RETENTION = RetentionPolicy()


def effective_ttl_seconds(
    memory_type: MemoryType, ttl_seconds: int | None, policy: RetentionPolicy = DEFAULT_RETENTION
) -> int | None:
    """The lifetime to apply, in seconds, or None for "does not expire by age".

    The caller's `ttl_seconds` wins over the type's default (it may be shorter or longer), capped at
    the type's maximum. A type missing from the policy has no default and no cap.
    """
    if ttl_seconds is not None and ttl_seconds <= 0:
        raise ValueError("ttl_seconds must be positive")
    cap_days = policy.max_days.get(memory_type)
    cap = cap_days * DAY_SECONDS if cap_days is not None else None
    if ttl_seconds is None:
        default_days = policy.default_days.get(memory_type)
        if default_days is None:
            return None
        ttl = default_days * DAY_SECONDS
    else:
        ttl = ttl_seconds
    return min(ttl, cap) if cap is not None else ttl


def expires_at(
    created_at: datetime,
    memory_type: MemoryType,
    ttl_seconds: int | None = None,
    policy: RetentionPolicy = DEFAULT_RETENTION,
) -> datetime | None:
    """`created_at` plus the effective lifetime, or None when the memory does not expire by age."""
    ttl = effective_ttl_seconds(memory_type, ttl_seconds, policy)
    return None if ttl is None else created_at + timedelta(seconds=ttl)


class RetentionClass(BaseModel):
    """What a memory's `retention_class` adds to its type's lifetime, applied by the expiry sweep.

    `max_age_days`: the memory expires that many days after it was created even if its type never
    expires (the sooner of the two wins). `hold`: a legal or audit hold: the sweep never expires it,
    even past `expires_at`, until the hold is lifted (the class changed or removed from the config).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_age_days: int | None = Field(default=None, gt=0)
    hold: bool = False


DEFAULT_CLASSES: dict[str, RetentionClass] = {"standard": RetentionClass()}
"""Every memory is `standard` unless an operator assigns another class: type lifetimes only."""


def class_expired(
    retention_class: str,
    created_at: datetime,
    expires_at_: datetime | None,
    now: datetime,
    classes: dict[str, RetentionClass] = DEFAULT_CLASSES,
) -> bool:
    """Whether the expiry sweep takes this memory now (the SQL sweep applies the same predicate).

    An unknown class is treated as `standard`: a typo in the config never keeps data longer than its type allows.
    """
    policy = classes.get(retention_class, RetentionClass())
    if policy.hold:
        return False
    if expires_at_ is not None and expires_at_ <= now:
        return True
    return policy.max_age_days is not None and created_at <= now - timedelta(days=policy.max_age_days)
