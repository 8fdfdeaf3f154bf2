"""`memwarden audit verify | show MEMORY_ID | pubkey | pseudonym`: the operator's view of the audit log.

These read the durable store directly (as configured by the environment or `--data-dir`), never
memory content: events carry ids, hashes and reason codes only.
"""

from __future__ import annotations

import json
import sys
from urllib.parse import quote

from memwarden.audit_heads import audit_heads
from memwarden.config import Settings
from memwarden.forget import subject_key
from memwarden.records import Namespace, Scope, namespace_label
from memwarden.stores.audit import AuditEvent, Pseudonymizer
from memwarden.stores.sql import SqlStore, open_store

SHOW_LIMIT = 1000


def workflow_url(settings: Settings, workflow_id: str) -> str:
    """Where the Temporal Web UI shows this workflow's history."""
    base = settings.temporal_ui_url.rstrip("/")
    return f"{base}/namespaces/{quote(settings.temporal_namespace, safe='')}/workflows/{quote(workflow_id, safe='')}"


async def audit_verify(settings: Settings, *, as_json: bool = False) -> int:
    store = await open_store(settings)
    try:
        result = await store.verify_audit_chain(
            settings.audit_verifier,
            require_every=settings.audit_checkpoint_every,
            published=await audit_heads(settings).published(),
        )
    finally:
        await store.close()
    if as_json:
        print(result.model_dump_json())
    elif result.ok:
        print(
            f"audit chain ok: {result.events} events, {result.checkpoints} signed checkpoints, "
            f"head seq {result.head_seq} {result.head_hash or ''}".rstrip()
            + (
                f"; {result.events_past_published} events past the last published head, seq {result.last_published_seq}"
                if result.events_past_published is not None
                else "; no head published yet"
            )
        )
    else:
        print(
            f"audit chain BROKEN at seq {result.broken_seq}: {result.reason} "
            f"({result.events} events verified before it; last good checkpoint: {result.last_good_checkpoint})",
            file=sys.stderr,
        )
    return 0 if result.ok else 1


async def _events_of(store: SqlStore, memory_id: str, tenant: str | None) -> list[AuditEvent]:
    tenants = [tenant] if tenant else await store.audit_tenants_of(memory_id)
    events: list[AuditEvent] = []
    for t in tenants:
        page, _ = await store.list_audit(t, memory_id=memory_id, oldest_first=True, limit=SHOW_LIMIT, cursor=None)
        events.extend(page)
    return sorted(events, key=lambda e: e.seq)


async def audit_show(settings: Settings, memory_id: str, *, tenant: str | None = None, as_json: bool = False) -> int:
    store = await open_store(settings)
    try:
        events = await _events_of(store, memory_id, tenant)
        current = {e.tenant_id: await store.get_memory(e.tenant_id, memory_id) for e in events}
    finally:
        await store.close()
    if not events:
        print(f"no audit events for memory {memory_id}", file=sys.stderr)
        return 1
    if as_json:
        rows = [
            {
                **e.model_dump(mode="json"),
                "workflow_url": workflow_url(settings, e.workflow_id) if e.workflow_id else None,
            }
            for e in events
        ]
        print(json.dumps(rows))
        return 0
    for tenant_id, record in current.items():
        status = record.status.value if record is not None else "absent"
        print(f"memory {memory_id} (tenant {tenant_id}): now {status}")
    for e in events:
        hashes = (
            f" {(e.hash_before or '-')[:12]}->{(e.hash_after or '-')[:12]}" if e.hash_before or e.hash_after else ""
        )
        print(
            f"  #{e.seq} {e.at.isoformat()} {e.operation:<10} reason={e.reason or '-'} actor={e.actor} "
            f"policy={e.policy_version}{hashes}"
        )
        if e.workflow_id:
            print(f"      workflow {e.workflow_id}  {workflow_url(settings, e.workflow_id)}")
    return 0


def audit_pubkey(settings: Settings) -> int:
    signer = settings.audit_signer
    print(f"{signer.public_base64()}  key_id={signer.key_id}")
    return 0


def audit_pseudonym(settings: Settings, tenant: str, value: str) -> int:
    """What an auditor holding the key looks for: the stored forms of one id (events and receipts)."""
    pseudonyms = Pseudonymizer(subject_key(settings.auth_secret_value))
    print(f"as actor:          {pseudonyms.actor(tenant, value)}")
    namespace = namespace_label(Namespace(tenant_id=tenant, scope=Scope.USER, owner_id=value))
    print(f"as namespace:      {pseudonyms.namespace(tenant, namespace)}")
    print(f"as subject_hash:   {pseudonyms.subject(tenant, value)[1:]}")
    return 0
