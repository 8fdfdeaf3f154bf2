"""PendingWriteWorkflow: a staged write waits for its owner (or moderator) for the confirmation window.

Started by RememberWorkflow as an abandoned child, so the proposer's answer (`PENDING`) comes back
at once while this waits up to a day on a durable timer. `settle` is an update, so a confirm or
decline answers with the outcome in the same round trip. Once settled or timed out the workflow
closes, and a late confirm finds it closed: the API turns that into 409.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ApplicationError

from memwarden.records import PendingWrite, RememberResult, SettleAction, SettleRequest
from memwarden.temporal.names import SETTLE_PENDING

SETTLE_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=10))


@workflow.defn(name="PendingWriteWorkflow")
class PendingWriteWorkflow:
    def __init__(self) -> None:
        self._request: SettleRequest | None = None
        self._result: RememberResult | None = None

    @workflow.run
    async def run(self, pending: PendingWrite) -> RememberResult:
        try:
            await workflow.wait_condition(
                lambda: self._request is not None, timeout=timedelta(seconds=pending.window_seconds)
            )
        except TimeoutError:
            self._request = SettleRequest(action=SettleAction.TIMEOUT, actor="system:confirmation-window")
        assert self._request is not None
        self._result = await workflow.execute_activity(
            SETTLE_PENDING,
            args=[pending.commit, self._request],
            result_type=RememberResult,
            start_to_close_timeout=timedelta(seconds=30),
            retry_policy=SETTLE_RETRY,
        )
        await workflow.wait_condition(workflow.all_handlers_finished)
        return self._result

    @workflow.update
    async def settle(self, request: SettleRequest) -> RememberResult:
        """Confirm or decline; the same request twice gets the same answer, a conflicting one is refused."""
        if self._request is None:
            self._request = request
        elif self._request.action is not request.action:
            raise ApplicationError(f"already {self._request.action.value}", type="AlreadySettled", non_retryable=True)
        await workflow.wait_condition(lambda: self._result is not None)
        assert self._result is not None
        return self._result

    @settle.validator
    def _validate(self, request: SettleRequest) -> None:
        if request.action is SettleAction.TIMEOUT:
            raise ValueError("timeout is not a caller's action")
