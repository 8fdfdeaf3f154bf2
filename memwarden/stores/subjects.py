"""Subject handles: a person's ids wait in the store while a workflow runs, its history holds a handle.

Why: workflow history is a copy kept for the namespace's retention, and erasing a person must leave
nothing of theirs readable in it (docs/decisions/subject-handles.md).
RememberWorkflow and RetrieveWorkflow need to know whose memories they act on; their inputs carry
`subject_ref`, a claim check named `subject-<subject_hash>-<nonce>`, and the activities resolve it.
Erasing the owner deletes every handle under their hash (`ForgetStore._drop_subject_refs`), so a
history decoded afterwards names nobody. SummarizeWorkflow's handles (memwarden/stores/summaries.py)
are made and resolved here too.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from memwarden.forget import SUBJECT_REF_PREFIX, subject_hash, subject_ref_prefix
from memwarden.stores.sql import SqlStore


def new_handle(key: bytes, tenant_id: str, owner_id: str) -> str:
    """A fresh handle for one workflow's view of `owner_id` (found again only through their keyed hash)."""
    return f"{subject_ref_prefix(subject_hash(key, tenant_id, owner_id))}{uuid.uuid4().hex[:16]}"


def handle_row(ref: str, tenant_id: str, ids: dict[str, Any], expires_at: datetime) -> tuple[str, str, str, datetime]:
    """The candidates row that parks `ids` under `ref` (for `SqlStore.put_candidates`)."""
    return ref, tenant_id, json.dumps(ids, separators=(",", ":"), sort_keys=True), expires_at


async def resolve_handle(store: SqlStore, ref: str) -> dict[str, Any] | None:
    """The ids parked under a handle; None when it is gone (expired, or its person was erased)."""
    if not ref.startswith(SUBJECT_REF_PREFIX):
        return None
    return handle_ids(ref, await store.get_candidate(ref))


def handle_ids(ref: str, raw: str | None) -> dict[str, Any] | None:
    """The ids parked under handle `ref`, from its row's content `raw` as the caller read it (with other
    claim checks, in one statement); None when `ref` is no handle or its row is gone."""
    if raw is None or not ref.startswith(SUBJECT_REF_PREFIX):
        return None
    body = json.loads(raw)
    return body if isinstance(body, dict) else None
