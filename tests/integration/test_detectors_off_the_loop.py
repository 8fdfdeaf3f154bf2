"""Issue 21 part 7: detectors never run on the event loop the API shares with the worker.

Real HTTP into the embedded stack (API, worker and Temporal client on one event loop, as `memwarden up`
runs them). The detectors are CPU-bound Python: on the loop, a hostile maximum-size text would stop every
other request for as long as it is screened. The test records which thread each screening runs on,
by wrapping the real `memwarden.detect.screen` (it still does all the work). That the loop stays
responsive while a thread screens is `test_detect.py::test_screen_async_keeps_the_event_loop_responsive`.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import httpx
import pytest

from memwarden import detect
from tests.integration.api_stack import Api

FACT = {"type": "fact", "source_kind": "user", "reason": "user_stated_fact", "importance": 0.8}


async def test_every_screening_runs_in_a_worker_thread_not_on_the_event_loop(
    api: Api, http: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    loop_thread = threading.get_ident()
    ran_on: list[int] = []
    real = detect.screen

    def recorded(*args: Any, **kwargs: Any) -> Any:
        ran_on.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(detect, "screen", recorded)
    headers = api.auth(f"t-{uuid.uuid4().hex[:10]}", "alice")
    slowest = "1." * (api.settings.max_content_chars // 2)  # runs of one IP address: the slowest shape we know
    answers = [
        await http.post("/v1/memories", headers=headers, json=FACT | {"content": slowest}),
        await http.post(
            "/v1/memories",
            headers=headers,
            json=FACT | {"content": "The user prefers aisle seats.", "provenance": {"session": "s-1"}},
        ),
    ]
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]
    assert (answers[0].json()["decision"], answers[0].json()["reason"]) == ("REJECT", "pii_detected")
    assert answers[1].json()["decision"] == "ADD"
    assert len(ran_on) >= 2  # both candidates were screened, through `screen`
    assert loop_thread not in ran_on
