"""Remember's activities: the Temporal adapters of `memwarden.services.remember.RememberService`.

Each passes its run (for the audit ids) to the service, and turns `CandidateGone` into the
non-retryable `ApplicationError` of the same type name: a retry cannot bring parked content back.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TypeVar

from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.run import current_run
from memwarden.errors import CandidateGone
from memwarden.policy.gate import GatePolicy, Remembered
from memwarden.records import CommitInput, RememberInput, RememberResult, SettleRequest
from memwarden.services.deps import Deps
from memwarden.services.remember import RememberService
from memwarden.temporal.names import REMEMBER_CANDIDATE, SETTLE_PENDING

T = TypeVar("T")


async def non_retryable_if_gone(step: Awaitable[T]) -> T:
    """`CandidateGone` as Temporal sees it: retrying cannot help (non-retryable)."""
    try:
        return await step
    except CandidateGone as gone:
        raise ApplicationError(str(gone), type=type(gone).__name__, non_retryable=True) from None


class RememberActivities:
    """Bound to one worker's Deps; registered by method."""

    def __init__(self, deps: Deps) -> None:
        self.deps = deps
        self.service = RememberService(deps)

    @activity.defn(name=REMEMBER_CANDIDATE)
    async def remember_candidate(self, c: RememberInput, policy: GatePolicy) -> Remembered:
        """The whole write gate in one step (`RememberService.remember`)."""
        return await non_retryable_if_gone(self.service.remember(c, policy, current_run(self.deps)))

    @activity.defn(name=SETTLE_PENDING)
    async def settle_pending(self, ci: CommitInput, request: SettleRequest) -> RememberResult:
        """Confirmed: the pending row goes live; declined or timed out: rejected (`RememberService.settle`)."""
        return await non_retryable_if_gone(self.service.settle(ci, request, current_run(self.deps)))

    def all(self) -> list[object]:
        return [self.remember_candidate, self.settle_pending]
