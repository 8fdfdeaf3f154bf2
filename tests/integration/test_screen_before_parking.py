"""Content is parked only after it passed the detectors (issue 22 part 8).

Over real HTTP against the embedded stack (SQLite in WAL mode in the data dir, the Temporal dev
server's database there too): a proposal holding a secret is answered REJECT secret_detected, as the
gate answers it, and no byte of it reaches any file under the data dir (the store, its -wal, the
dev server's history). A write that passes is on disk (the control: the scan can see a parked or
stored text), and it was screened once: the workflow's input carries the API's screening.
"""

from __future__ import annotations

import secrets
import string
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from memwarden.prescreened import prescreened
from memwarden.records import RememberInput, Screening, content_hash
from tests.forget_support import scan, tenant
from tests.stack_support import Stack, embedded_stack


@pytest.fixture(scope="module")
async def stack(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Stack]:
    async with embedded_stack(tmp_path_factory.mktemp("prescreen-data")) as s:
        yield s


@pytest.fixture
async def http(stack: Stack) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=stack.base_url, timeout=30.0) as client:
        yield client


def _aws_key() -> str:
    """An AWS access key id shape (detect-secrets' AWSKeyDetector), random so it is its own marker."""
    return "AKIA" + "".join(secrets.choice(string.ascii_uppercase + "234567") for _ in range(16))


async def test_a_rejected_secret_never_reaches_the_database_or_its_wal(stack: Stack, http: httpx.AsyncClient) -> None:
    t = tenant()
    alice = stack.auth(t, "alice")
    key = _aws_key()
    answer = await http.post(
        "/v1/memories",
        json={
            "content": f"the deploy key is {key} for the staging bucket",
            "type": "fact",
            "source_kind": "user",
            "reason": "user_stated_fact",
            "idempotency_key": "k-1",
        },
        headers=alice,
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert (body["decision"], body["reason"], body["memory_id"]) == ("REJECT", "secret_detected", None)
    assert body["workflow_id"].startswith("remember-") and key not in answer.text
    # The same key again: the same answer, and the rejection is on record once, with no content hash.
    again = await http.post(
        "/v1/memories",
        json={
            "content": f"the deploy key is {key} for the staging bucket",
            "type": "fact",
            "source_kind": "user",
            "reason": "user_stated_fact",
            "idempotency_key": "k-1",
        },
        headers=alice,
    )
    assert (again.json()["decision"], again.json()["reason"]) == ("REJECT", "secret_detected")
    denials, _ = await stack.deps.store.list_audit(t, operation="deny", limit=10, cursor=None)
    assert [(e.reason, e.hash_after, "content_hash" in e.details) for e in denials] == [
        ("secret_detected", None, False)
    ]
    # A text that passes, written the same way, is on disk: the scan below can see what reaches a file.
    marker = f"heron{uuid.uuid4().hex[:10]}"
    passed = await http.post(
        "/v1/memories",
        json={
            "content": f"alice keeps the {marker} notebook by the window",
            "type": "fact",
            "source_kind": "user",
            "reason": "user_stated_fact",
        },
        headers=alice,
    )
    assert passed.json()["decision"] == "ADD", passed.text
    assert scan(stack.settings.data_dir, marker.encode())
    hits = scan(stack.settings.data_dir, key.encode())
    assert hits == [], hits  # not in mw.db, mw.db-wal, nor any other file of the data dir


def _input(content: str, screening: Screening | None) -> RememberInput:
    return RememberInput(
        memory_id="m",
        candidate_ref="m",
        content_hash=content_hash(content),
        content_chars=len(content),
        tenant_id="t",
        owner_id="o",
        scope="user",
        agent_id=None,
        store=None,
        type="fact",
        slot=None,
        source_kind="user",
        source_ref=None,
        provenance={},
        reason="user_stated_fact",
        importance=None,
        sensitivity="low",
        ttl_seconds=None,
        actor="user:o",
        screening=screening,
    )


def test_the_activity_reuses_a_screening_only_for_the_text_it_was_made_for() -> None:
    clean = Screening()
    assert prescreened(_input("alice likes tea", clean), "alice likes tea") == clean
    # Parked text that is not what the API screened (a swapped claim check) is screened again.
    assert prescreened(_input("alice likes tea", clean), f"my key is {_aws_key()}") is None
    assert prescreened(_input("alice likes tea", None), "alice likes tea") is None
