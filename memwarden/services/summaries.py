"""Summaries, the service: the owner's episodic memories -> one summary with lineage.

SummarizeWorkflow's `summarize_owner` activity (`activities.summaries`) is the adapter.
"""

from __future__ import annotations

from memwarden.records import Scope, SummarizeInput, SummarizeResult, namespace_label
from memwarden.services.deps import Deps
from memwarden.services.run import Run
from memwarden.stores.audit import AuditEventIn
from memwarden.stores.cache import invalidation_prefixes
from memwarden.stores.summaries import claim_summary_request, derive, summary_sources


class SummaryService:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    async def summarize(self, request: SummarizeInput, run: Run) -> SummarizeResult:
        """Idempotent (the summary's id is a function of its sources); a gone handle summarizes nothing."""
        deps = self.deps
        claimed = await claim_summary_request(deps.store, request)
        if claimed is None:
            return SummarizeResult(summary_id=None, derived_from=0)
        owner_id, actor = claimed
        sources = await summary_sources(deps.store, request.tenant_id, owner_id)
        record = await derive(
            deps.store,
            deps.index,
            deps.embedder,
            deps.summarizer,
            tenant_id=request.tenant_id,
            owner_id=owner_id,
            sources=sources,
            max_chars=deps.settings.max_content_chars,
            actor=actor,
            now=deps.clock(),
        )
        if record is None:
            return SummarizeResult(summary_id=None, derived_from=0)
        await deps.store.append_audit(
            AuditEventIn(
                id=f"summary-{record.id}",
                at=deps.clock(),
                tenant_id=record.tenant_id,
                actor=actor,
                operation="summarize",
                memory_id=record.id,
                namespace=namespace_label(record),
                reason="derived_summary",
                workflow_id=run.workflow_id,
                details={"content_hash": record.content_hash, "derived_from": len(sources)},
            )
        )
        for prefix in invalidation_prefixes(record.tenant_id, Scope.USER, record.owner_id):
            await deps.cache.delete_prefix(prefix)
        return SummarizeResult(summary_id=record.id, derived_from=len(sources))
