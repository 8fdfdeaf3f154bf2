"""ConversationWorkflow's activities: the Temporal adapters of
`memwarden.services.conversations.ConversationService`.

Extract the candidates of a parked conversation, consolidate the session's near-duplicate episodes,
drop the parked conversation. Each passes what is Temporal's (the run, for the audit event) to the
service and turns `CandidateGone` into the non-retryable `ApplicationError` of the same type name.
"""

from __future__ import annotations

from temporalio import activity

from activities.errors import non_retryable_if_gone
from activities.run import current_run
from memwarden.extract.base import Extractor
from memwarden.records import ConsolidateInput, ConsolidateResult, ConversationInput, Extraction
from memwarden.services.conversations import ConversationService
from memwarden.services.deps import Deps
from memwarden.temporal.names import CONSOLIDATE_SESSION, EXTRACT_CONVERSATION, RELEASE_CONVERSATION


class ConversationActivities:
    """Bound to one worker's Deps (and its extractor); registered by method."""

    def __init__(self, deps: Deps, extractor: Extractor | None = None) -> None:
        self.deps = deps
        self.service = ConversationService(deps, extractor)

    @activity.defn(name=EXTRACT_CONVERSATION)
    async def extract_conversation(self, request: ConversationInput) -> Extraction:
        """The sealed candidates, their content parked (`ConversationService.extract`)."""
        return await non_retryable_if_gone(self.service.extract(request))

    @activity.defn(name=CONSOLIDATE_SESSION)
    async def consolidate_session(self, request: ConsolidateInput) -> ConsolidateResult:
        """The session's summary, with lineage (`ConversationService.consolidate`)."""
        return await self.service.consolidate(request, current_run(self.deps))

    @activity.defn(name=RELEASE_CONVERSATION)
    async def release_conversation(self, ref: str) -> None:
        """The parked messages dropped (idempotent)."""
        await self.service.release(ref)

    def all(self) -> list[object]:
        return [self.extract_conversation, self.consolidate_session, self.release_conversation]
