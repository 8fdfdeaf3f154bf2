"""Retention, the service: tombstone what has expired, per tenant, and record the deletions.

RetentionWorkflow's `retention_plan` activity (`activities.retention`) is the adapter.
"""

from __future__ import annotations

from memwarden.forget import ExpiredSelector, redacted, selector_key, subject_key
from memwarden.records import ForgetInput, RetentionPlan
from memwarden.services.deps import Deps
from memwarden.stores.audit import AuditEventIn
from memwarden.stores.forget import ForgetStore

REQUESTER = "system:retention"
REASON = "retention_expired"


class RetentionService:
    def __init__(self, deps: Deps) -> None:
        self.deps = deps

    async def plan(self) -> RetentionPlan:
        """Idempotent: a retry finds the same memories already `expired` and answers the same deletions."""
        forget = ForgetStore(self.deps.store, self.deps.settings.retention_classes)
        now = self.deps.clock()
        key = subject_key(self.deps.settings.auth_secret_value)
        selector = ExpiredSelector()
        plan = RetentionPlan()
        # Expired claim checks (parked content, queries, subject handles) go too: each was due to expire.
        await self.deps.store.delete_expired_candidates(now)
        for tenant_id in await forget.tenants_with_expired(now):
            body = redacted(selector, key, tenant_id)
            row, _ = await forget.begin(
                tenant_id=tenant_id,
                requester=REQUESTER,
                selector=selector,
                redacted_selector=body,
                selector_key=selector_key(tenant_id, body),
                reason=REASON,
                subject_hash=None,
                now=now,
            )
            # Appended whether or not `begin` created the deletion just now: the event's id is the
            # deletion's, so a retry after a crash between the two writes records it, and nothing twice.
            await self.deps.store.append_audit(
                AuditEventIn(
                    id=f"forget-request-{row.id}",
                    at=now,
                    tenant_id=tenant_id,
                    actor=REQUESTER,
                    operation="forget_requested",
                    reason=REASON,
                    workflow_id=row.workflow_id,
                    deletion_id=row.id,
                    details={"selector": body, "counts": row.counts or {}},
                )
            )
            if row.status != "verified":
                plan.deletions.append(ForgetInput(deletion_id=row.id, tenant_id=tenant_id))
        return plan
