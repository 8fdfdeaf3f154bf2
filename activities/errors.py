"""How a service's errors look to Temporal, shared by the adapters."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from temporalio.exceptions import ApplicationError

from memwarden.errors import CandidateGone, ImportGone

T = TypeVar("T")


async def non_retryable_if_gone(step: Awaitable[T]) -> T:
    """`CandidateGone` (or `ImportGone`) as Temporal sees it: an `ApplicationError` of the same type name,
    non-retryable (a retry cannot bring parked content, or a deleted import, back)."""
    try:
        return await step
    except (CandidateGone, ImportGone) as gone:
        raise ApplicationError(str(gone), type=type(gone).__name__, non_retryable=True) from None
