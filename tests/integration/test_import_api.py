"""Bulk import over real HTTP: `memwarden import FILE` against the embedded stack, through the same gate.

Bad lines (not JSON, a missing field, oversized, a secret) are reported by number and never stop the
rest; the same file twice applies nothing twice; a batch retried after its commit landed applies nothing
again; PENDING lines open their confirmation window; only the principal that started an import (and the
tenant's operators) may read it. Conversation lines run the ConversationWorkflow `POST /v1/conversations`
runs, under the same id, and are checked and screened as that route checks them; each ends in one outcome
on its line. `memwarden import` takes its token from the environment or a file, never argv. Every text
is synthetic.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
from temporalio.testing import ActivityEnvironment

from activities.imports import ImportActivities
from activities.remember import RememberActivities
from memwarden.policy.gate import DEFAULT_POLICY
from memwarden.policy.imports import ConversationLineDone, ImportBatch
from memwarden.records import ConversationResult, Status
from memwarden.services.imports import batch_cut
from stack.import_cli import Progress, chunks, file_lines, run_import
from tests.forget_support import decoded_histories_containing
from tests.integration.api_stack import Api, assert_problem
from tests.workflows.record_histories import connect_client
from workflows.conversation import ConversationWorkflow

FACT = {"type": "fact", "source_kind": "user", "reason": "user_stated_fact", "importance": 0.8}
SECRET = "the deploy key is AKIAZ7QXW3SYNTH5EXMP, keep it handy"
REPO_ROOT = Path(__file__).resolve().parents[2]


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:8]}"


def line(content: str, **fields: Any) -> str:
    return json.dumps({"content": content, **FACT, **fields})


async def cli(api: Api, path: Path, token: str) -> tuple[int, str]:
    out = io.StringIO()
    code = await asyncio.to_thread(run_import, path, api.base_url, token, out=out, timeout_s=120)
    return code, out.getvalue()


async def state_of(http: httpx.AsyncClient, headers: dict[str, str], import_id: str, **params: Any) -> dict[str, Any]:
    answer = await http.get(f"/v1/imports/{import_id}", headers=headers, params=params)
    assert answer.status_code == 200, answer.text
    return answer.json()  # type: ignore[no-any-return]


async def live_contents(http: httpx.AsyncClient, headers: dict[str, str]) -> list[str]:
    answer = await http.get("/v1/memories", headers=headers, params={"limit": 200})
    assert answer.status_code == 200, answer.text
    return sorted(m["content"] for m in answer.json()["items"])


def import_id_of(output: str) -> str:
    return output.split()[1].rstrip(":")


async def import_lines(
    api: Api, http: httpx.AsyncClient, path: Path, lines: list[str], t: str, who: str
) -> tuple[dict[str, Any], str]:
    """Write the lines to `path`, import it with `memwarden import` as `who`: the import's state, the output."""
    await asyncio.to_thread(path.write_text, "\n".join(lines) + "\n")
    code, output = await cli(api, path, api.token(t, who))
    assert code == 0, output
    return await state_of(http, api.auth(t, who), import_id_of(output)), output


async def test_bad_lines_are_reported_by_number_and_the_rest_apply(
    api: Api, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    t = tenant()
    alice = api.auth(t, "alice")
    got, output = await import_lines(
        api,
        http,
        tmp_path / "mixed.ndjson",
        [
            line("Alice keeps her passport in the blue folder"),  # 1
            '{"content": "Alice likes',  #  2: not JSON
            json.dumps({"content": "Alice was born in Lisbon", "source_kind": "user", "reason": "x"}),  # 3: no type
            line("A" * 5000),  # 4: over max_content_chars
            line(SECRET),  # 5: the gate rejects it
            line("Alice takes the 7:40 train to work", slot="commute"),  # 6
            json.dumps({"session_id": "s-1", "messages": [{"role": "user", "content": "hi"}]}),  # 7: nothing
            "",  # 8: blank
            "[1, 2]",  # 9: not an object
            line("Alice's desk is on the fourth floor", source_kind="system"),  # 10: a user may not declare system
            line("Alice runs on Tuesdays and Thursdays"),  # 11
        ],
        t,
        "alice",
    )
    assert got["status"] == "done" and got["total_lines"] == 11 and got["done_lines"] == 11
    assert got["position"] == 12
    reported = {(e["line"], e["decision"], e["reason"], e["field"]) for e in got["errors"]}
    assert reported == {
        (2, "ERROR", "invalid_json", None),
        (3, "ERROR", "validation_failed", "type"),
        (4, "ERROR", "content_too_large", "content"),
        (5, "REJECT", "secret_detected", None),
        (8, "ERROR", "blank_line", None),
        (9, "ERROR", "not_an_object", None),
        (10, "ERROR", "source_kind_not_allowed", "source_kind"),
    }
    assert got["counts"] == {"ADD": 3, "UPDATE": 0, "NOOP": 1, "PENDING": 0, "REJECT": 1, "ERROR": 6}
    assert await live_contents(http, alice) == [
        "Alice keeps her passport in the blue folder",
        "Alice runs on Tuesdays and Thursdays",
        "Alice takes the 7:40 train to work",
    ]
    assert "AKIA" not in json.dumps(got) and "Lisbon" not in json.dumps(got)  # codes and numbers, never text
    assert "line 5: REJECT secret_detected" in output and "line 2: ERROR invalid_json" in output
    page = await state_of(http, alice, got["import_id"], limit=3)
    assert [e["line"] for e in page["errors"]] == [2, 3, 4] and page["next_errors_after"] == 4
    rest = await state_of(http, alice, got["import_id"], limit=100, errors_after=4)
    assert [e["line"] for e in rest["errors"]] == [5, 8, 9, 10] and rest["next_errors_after"] is None
    # Each applied line left its audit event, under the import's workflow.
    ops = api.auth(t, "ops", "operator")
    events = (await http.get("/v1/audit", headers=ops, params={"limit": 200})).json()["items"]
    by_op = sorted((e["operation"], e["reason"]) for e in events if e["workflow_id"] == got["workflow_id"])
    assert by_op == [("create", "accepted")] * 3
    # The secret was refused by the API before parking (screen-before-parking): its deny event has no run.
    denied = [e for e in events if e["operation"] == "deny"]
    assert [(e["reason"], e["workflow_id"]) for e in denied] == [("secret_detected", None)]


async def test_a_line_the_gate_rejects_is_never_parked(api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()
    kim = api.auth(t, "kim")
    body = (line("Kim waters the ferns on Sundays") + "\n" + line(SECRET) + "\n").encode()
    created = await http.post(
        "/v1/imports", headers=kim, json={"sha256": hashlib.sha256(body).hexdigest(), "total_lines": 2}
    )
    import_id = created.json()["import_id"]
    nd = kim | {"Content-Type": "application/x-ndjson"}
    put = await http.put(f"/v1/imports/{import_id}/lines", headers=nd, params={"first_line": 1}, content=body)
    assert put.status_code == 200, put.text
    assert [(e["line"], e["decision"], e["reason"]) for e in put.json()["errors"]] == [(2, "REJECT", "secret_detected")]
    parked = await api.store.parked_lines(import_id, from_line=1, limit=10)
    assert [p.line_no for p in parked] == [1]  # the secret's text was never written
    assert all("AKIA" not in p.payload for p in parked)
    assert json.loads(parked[0].payload)["input"]["screening"] is not None  # the batch reuses this screening
    again = await http.put(f"/v1/imports/{import_id}/lines", headers=nd, params={"first_line": 1}, content=body)
    assert again.json()["received"] == 0
    ops = api.auth(t, "ops", "operator")
    events = (await http.get("/v1/audit", headers=ops, params={"limit": 50})).json()["items"]
    assert [e["reason"] for e in events if e["operation"] == "deny"] == ["secret_detected"]  # once, not per upload


async def test_the_same_file_twice_applies_nothing_twice(api: Api, http: httpx.AsyncClient, tmp_path: Path) -> None:
    t = tenant()
    bob = api.auth(t, "bob")
    path = tmp_path / "twice.ndjson"
    texts = [f"Bob's locker number {n} is in row {n % 7}" for n in range(1, 41)]
    path.write_text("".join(line(x, slot=f"locker-{n}") + "\n" for n, x in enumerate(texts)))
    first_code, first = await cli(api, path, api.token(t, "bob"))
    second_code, second = await cli(api, path, api.token(t, "bob"))
    assert first_code == second_code == 0
    assert import_id_of(first) == import_id_of(second)  # the same caller and file: the same import
    assert await live_contents(http, bob) == sorted(texts)
    # The same lines in another file (a new import) are duplicates of what is live: NOOP, nothing stored.
    other = tmp_path / "again.ndjson"
    other.write_text(path.read_text() + line("Bob's bike is the green one") + "\n")
    code, output = await cli(api, other, api.token(t, "bob"))
    assert code == 0
    got = await state_of(http, bob, import_id_of(output))
    assert got["counts"]["NOOP"] == 40 and got["counts"]["ADD"] == 1
    assert len(await live_contents(http, bob)) == 41


async def test_a_slot_written_twice_in_one_file_supersedes_in_order(
    api: Api, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    t = tenant()
    carol = api.auth(t, "carol")
    path = tmp_path / "slots.ndjson"
    path.write_text(
        line("Carol's favourite colour is green", slot="colour")
        + "\n"
        + line("Carol's favourite colour is orange now", slot="colour")
        + "\n"
    )
    code, output = await cli(api, path, api.token(t, "carol"))
    assert code == 0
    got = await state_of(http, carol, import_id_of(output))
    assert got["counts"]["ADD"] == 1 and got["counts"]["UPDATE"] == 1
    assert await live_contents(http, carol) == ["Carol's favourite colour is orange now"]


async def test_a_retried_batch_applies_nothing_again(api: Api, http: httpx.AsyncClient) -> None:
    """The batch's commit landed but its result was lost: the retry finds the lines decided and skips them."""
    t = tenant()
    dana = api.auth(t, "dana")
    texts = [f"Dana's meeting room {n} has {n + 2} chairs" for n in range(12)]
    body = "".join(line(x, slot=f"room-{n}") + "\n" for n, x in enumerate(texts)).encode()
    created = await http.post(
        "/v1/imports", headers=dana, json={"sha256": hashlib.sha256(body).hexdigest(), "total_lines": len(texts)}
    )
    assert created.status_code == 201, created.text
    import_id = created.json()["import_id"]
    put = await http.put(
        f"/v1/imports/{import_id}/lines",
        headers={**dana, "Content-Type": "application/x-ndjson"},
        params={"first_line": 1},
        content=body,
    )
    assert put.status_code == 200 and put.json()["received"] == 12
    again = await http.put(  # a re-sent chunk changes nothing
        f"/v1/imports/{import_id}/lines",
        headers={**dana, "Content-Type": "application/x-ndjson"},
        params={"first_line": 1},
        content=body,
    )
    assert again.json()["received"] == 0
    await api.store.set_import_status(import_id, "running", expect=("uploading",), at=_now())
    batches = ImportActivities(api.deps, RememberActivities(api.deps))
    job = ImportBatch(import_id=import_id, tenant_id=t, position=1, limit=100, policy=DEFAULT_POLICY)
    first = await ActivityEnvironment().run(batches.import_batch, job)
    retried = await ActivityEnvironment().run(batches.import_batch, job)
    assert first.done and retried.done
    assert first.counts == retried.counts == {"ADD": 12}
    assert await live_contents(http, dana) == sorted(texts)
    ops = api.auth(t, "ops", "operator")
    events = (await http.get("/v1/audit", headers=ops, params={"limit": 200})).json()["items"]
    assert sum(e["operation"] == "create" for e in events) == 12  # one event per line, not two


async def test_pending_lines_open_their_confirmation_window(api: Api, http: httpx.AsyncClient, tmp_path: Path) -> None:
    t = tenant()
    erin = api.auth(t, "erin")
    agent = api.token(t, "svc", "agent", agent="planner", on_behalf_of="erin")
    path = tmp_path / "pending.ndjson"
    path.write_text(
        line("Erin seems to prefer morning meetings", type="preference", source_kind="model", confirm_requested=True)
        + "\n"
        + line("Erin said her office is in building C")
        + "\n"
    )
    code, output = await cli(api, path, agent)
    assert code == 0, output
    got = await state_of(http, api.auth(t, "svc", "agent", agent="planner", on_behalf_of="erin"), import_id_of(output))
    assert got["counts"]["PENDING"] == 1 and got["counts"]["ADD"] == 1
    listed = (await http.get("/v1/memories", headers=erin, params={"status": "pending"})).json()["items"]
    [staged] = listed
    assert staged["status"] == Status.PENDING.value
    ok = await http.post(f"/v1/memories/{staged['id']}/confirm", headers=erin)
    assert ok.status_code == 200 and ok.json()["decision"] == "ADD", ok.text


async def test_only_the_starter_and_operators_read_an_import(api: Api, http: httpx.AsyncClient, tmp_path: Path) -> None:
    t = tenant()
    path = tmp_path / "mine.ndjson"
    path.write_text(line("Frank parks on level two") + "\n")
    code, output = await cli(api, path, api.token(t, "frank"))
    assert code == 0
    import_id = import_id_of(output)
    assert (await http.get(f"/v1/imports/{import_id}", headers=api.auth(t, "frank"))).status_code == 200
    assert (await http.get(f"/v1/imports/{import_id}", headers=api.auth(t, "ops", "operator"))).status_code == 200
    for stranger in (api.auth(t, "gina"), api.auth(tenant(), "ops", "operator"), api.auth(tenant(), "frank")):
        assert_problem(await http.get(f"/v1/imports/{import_id}", headers=stranger), 404, code="not_found")
    # Nobody else may add lines to it or start it, and an operator may not import at all.
    nd = {"Content-Type": "application/x-ndjson"}
    put = await http.put(
        f"/v1/imports/{import_id}/lines", headers=api.auth(t, "gina") | nd, params={"first_line": 1}, content=b"{}"
    )
    assert_problem(put, 404)
    created = await http.post(
        "/v1/imports", headers=api.auth(t, "ops", "operator"), json={"sha256": "0" * 64, "total_lines": 1}
    )
    assert_problem(created, 403, code="role_cannot_write")


async def test_an_import_starts_only_when_every_line_arrived(api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()
    hugo = api.auth(t, "hugo")
    created = await http.post("/v1/imports", headers=hugo, json={"sha256": "a" * 64, "total_lines": 3})
    import_id = created.json()["import_id"]
    nd = hugo | {"Content-Type": "application/x-ndjson"}
    await http.put(f"/v1/imports/{import_id}/lines", headers=nd, params={"first_line": 1}, content=b"{}\n")
    body = assert_problem(
        await http.post(f"/v1/imports/{import_id}/start", headers=hugo), 409, code="import_incomplete"
    )
    assert body["missing_line"] == 2
    too_far = await http.put(
        f"/v1/imports/{import_id}/lines", headers=nd, params={"first_line": 3}, content=b"{}\n{}\n"
    )
    assert_problem(too_far, 422, field="first_line")
    wrong_type = await http.put(f"/v1/imports/{import_id}/lines", headers=hugo, params={"first_line": 2}, content=b"{}")
    assert_problem(wrong_type, 415)


def test_chunks_fit_the_body_limit_and_cut_oversized_lines() -> None:
    lines = file_lines(b"a\r\n" + b"b" * 100 + b"\n" + b"c" * 10 + b"\n")
    assert lines == [b"a", b"b" * 100, b"c" * 10]
    pieces = chunks(lines, 1, max_bytes=1024 + 60, line_max=50)
    assert [start for start, _ in pieces] == [1, 3]
    assert pieces[0][1] == b"a\n" + b"b" * 51 + b"\n"  # cut one byte past the limit: reported, never read


async def test_an_owner_erased_before_the_import_ran_leaves_nothing_parked(api: Api, http: httpx.AsyncClient) -> None:
    t = tenant()
    jo = api.auth(t, "jo")
    body = (line("Jo keeps the spare key under the mat") + "\n" + line("Jo's bike is the red one") + "\n").encode()
    created = await http.post(
        "/v1/imports", headers=jo, json={"sha256": hashlib.sha256(body).hexdigest(), "total_lines": 2}
    )
    import_id = created.json()["import_id"]
    nd = jo | {"Content-Type": "application/x-ndjson"}
    put = await http.put(f"/v1/imports/{import_id}/lines", headers=nd, params={"first_line": 1}, content=body)
    assert put.json()["received"] == 2
    erased = await http.post(
        "/v1/forget", headers=jo, json={"selector": {"kind": "owner", "owner_id": "jo"}, "reason": "user_request"}
    )
    assert erased.status_code == 202, erased.text
    started = await http.post(f"/v1/imports/{import_id}/start", headers=jo)
    assert started.status_code == 202, started.text
    for _ in range(200):
        got = await state_of(http, jo, import_id)
        if got["status"] == "done":
            break
        await asyncio.sleep(0.1)
    assert got["status"] == "done" and got["counts"]["ERROR"] == 2 and got["counts"]["ADD"] == 0
    assert {(e["line"], e["reason"]) for e in got["errors"]} == {(1, "forgotten"), (2, "forgotten")}
    assert await live_contents(http, jo) == []


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_progress_bar_shows_done_rejected_rate_and_eta() -> None:
    state = {"done_lines": 0, "counts": {"ADD": 0, "REJECT": 0, "ERROR": 0}}
    tty, plain = Terminal(), io.StringIO()
    for out in (tty, plain):
        bar = Progress(out, 1000)
        bar.show(state)
        bar.started -= 10  # ten seconds later, 500 lines decided, 7 of them not applied
        bar.show({"done_lines": 500, "counts": {"ADD": 493, "REJECT": 3, "ERROR": 4}}, final=True)
    drawn = tty.getvalue()
    assert drawn.startswith("\r") and drawn.count("\r") == 2 and drawn.endswith("\n")
    last = drawn.rsplit("\r", 1)[1]
    assert "500/1000 done, 7 rejected, 50 lines/s, eta 10s" in last
    assert "\r" not in plain.getvalue() and plain.getvalue().count("\n") == 2  # plain lines off a terminal


def test_a_batch_ends_where_a_line_depends_on_an_earlier_one() -> None:
    from memwarden.records import RememberInput  # the gate's input, as parked lines hold it

    def inp(memory_id: str, slot: str | None, owner: str = "o") -> RememberInput:
        return RememberInput.model_validate(
            {
                "memory_id": memory_id, "candidate_ref": memory_id, "content_hash": "h", "content_chars": 1,
                "tenant_id": "t", "owner_id": owner, "scope": "user", "agent_id": None, "store": None,
                "type": "fact", "slot": slot, "source_kind": "user", "source_ref": None, "provenance": {},
                "reason": "r", "importance": None, "sensitivity": "low", "ttl_seconds": None, "actor": "a",
            }
        )  # fmt: skip

    far, near = [1.0, 0.0], [0.0, 1.0]
    lines = [(1, inp("m1", "s"), "x"), (2, inp("m2", None), "y"), (3, inp("m3", "s"), "z")]
    assert batch_cut(lines, [far, near, far], 0.9) == 2  # line 3 writes line 1's slot
    lines = [(1, inp("m1", None), "x"), (2, inp("m2", None), "y"), (3, inp("m3", None, owner="p"), "z")]
    assert batch_cut(lines, [far, near, near], 0.9) == 3  # similar text in another namespace is independent
    assert batch_cut(lines[:2], [far, far], 0.9) == 1  # a near duplicate in the namespace waits
    valued = [(1, inp("m1", None), "Room 4 has 6 chairs"), (2, inp("m2", None), "Room 5 has 7 chairs")]
    assert batch_cut(valued, [far, far], 0.9) == 2  # close, but their values differ: the gate keeps both


# -- conversation lines -----------------------------------------------------------------------------

LENA_TALKS = [
    {"role": "user", "content": "I live in Oslo and I love jazz.", "turn_id": "u1"},
    {"role": "assistant", "content": "Nice to meet you!", "turn_id": "a1"},
    {"role": "user", "content": "Actually, I moved to Bergen last month.", "turn_id": "u2"},
]


def talk(session_id: str, messages: list[dict[str, Any]] | None = None, **fields: Any) -> str:
    """A conversation line: the body of `POST /v1/conversations`."""
    body: dict[str, Any] = {"session_id": session_id, **fields}
    if messages is not None:
        body["messages"] = messages
    return json.dumps(body)


CONVERSATION_FILE = [
    line("Lena keeps her passport in the red drawer"),  # 1
    talk("s-trip", LENA_TALKS),  # 2: three candidates (ADD, ADD, UPDATE): ADD
    talk("s-bad-role", [{"role": "robot", "content": "I live in Rome."}]),  # 3
    talk("s-no-messages"),  # 4
    talk("s-secret", [{"role": "user", "content": SECRET}]),  # 5: every message withheld
    talk(
        "s-half",
        [{"role": "user", "content": SECRET}, {"role": "user", "content": "My favourite season is autumn."}],
    ),  # 6: the secret withheld, the rest decided: ADD
    talk("s-chat", [{"role": "user", "content": "Can you suggest a weekend trip?"}]),  # 7: nothing to remember
    line("Lena runs on Mondays"),  # 8
    talk("s-zone", [{"role": "user", "content": "I live in Rome.", "timestamp": "2030-01-01T10:00:00"}]),  # 9
]


async def audit_events(api: Api, http: httpx.AsyncClient, t: str) -> list[dict[str, Any]]:
    answer = await http.get("/v1/audit", headers=api.auth(t, "ops", "operator"), params={"limit": 200})
    assert answer.status_code == 200, answer.text
    return answer.json()["items"]  # type: ignore[no-any-return]


async def test_conversation_lines_run_the_routes_workflow_and_end_in_one_outcome_each(
    api: Api, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    t = tenant()
    lena = api.auth(t, "lena")
    path = tmp_path / "conversations.ndjson"
    got, output = await import_lines(api, http, path, CONVERSATION_FILE, t, "lena")
    assert got["status"] == "done" and got["done_lines"] == 9 and got["position"] == 10
    assert got["counts"] == {"ADD": 4, "UPDATE": 0, "NOOP": 1, "PENDING": 0, "REJECT": 1, "ERROR": 3}
    assert [(e["line"], e["decision"], e["reason"], e["field"]) for e in got["errors"]] == [
        (3, "ERROR", "validation_failed", "messages.0.role"),
        (4, "ERROR", "validation_failed", "messages"),
        (5, "REJECT", "secret_detected", "messages.0.content"),
        (9, "ERROR", "validation_failed", "messages.0.timestamp"),
    ]
    assert "line 5: REJECT secret_detected (messages.0.content)" in output
    outcomes = {o.line_no: o for o in await api.store.import_outcomes_between(got["import_id"], 1, 9)}
    assert (outcomes[2].decision, outcomes[2].reason) == ("ADD", "accepted")
    assert (outcomes[6].decision, outcomes[6].reason) == ("ADD", "accepted")
    assert (outcomes[7].decision, outcomes[7].reason, outcomes[7].memory_id) == ("NOOP", "nothing_extracted", None)
    assert await api.store.parked_lines(got["import_id"], from_line=1, limit=10) == []

    # The conversation's candidates went through the gate, the correction superseding what it corrects.
    assert await live_contents(http, lena) == [
        "I love jazz.",
        "I moved to Bergen last month.",
        "Lena keeps her passport in the red drawer",
        "Lena runs on Mondays",
        "My favourite season is autumn.",
    ]
    rows = (await http.get("/v1/memories", headers=lena, params={"status": ["active", "superseded"]})).json()["items"]
    by_content = {m["content"]: m for m in rows}
    assert by_content["I live in Oslo."]["status"] == "superseded"
    assert outcomes[2].memory_id == by_content["I live in Oslo."]["id"]  # the first ADD of the line
    assert outcomes[6].memory_id == by_content["My favourite season is autumn."]["id"]
    # One decision event per memory, each from its own RememberWorkflow (the conversation's candidates)
    # or the import's batches (the candidate lines); the secrets refused before parking, once each.
    events = await audit_events(api, http, t)
    decided = sorted(
        (e["memory_id"], e["operation"], e["workflow_id"]) for e in events if e["operation"] in ("create", "update")
    )
    assert len(decided) == len(rows) == 6
    said = ("I live in Oslo.", "I love jazz.", "I moved to Bergen last month.", "My favourite season is autumn.")
    from_conversations = {by_content[text]["id"] for text in said}
    assert {(m, w) for m, _, w in decided if m in from_conversations} == {
        (m, f"remember-{m}") for m in from_conversations
    }
    assert sorted(
        (e["reason"], e["details"].get("conversation_message")) for e in events if e["operation"] == "deny"
    ) == [
        ("secret_detected", 0),
        ("secret_detected", 0),
    ]
    assert "AKIA" not in json.dumps(got) + output + json.dumps(events)

    # The same conversation sent to POST /v1/conversations is the import's run, under the same id: the route
    # joins it and answers its result.
    again = await http.post("/v1/conversations", headers=lena, json={"session_id": "s-trip", "messages": LENA_TALKS})
    assert again.status_code == 200, again.text
    answer = again.json()
    assert [(c["decision"], c["reason"], c["memory_id"]) for c in answer["candidates"]] == [
        ("ADD", "accepted", by_content["I live in Oslo."]["id"]),
        ("ADD", "accepted", by_content["I love jazz."]["id"]),
        ("UPDATE", "slot_value_changed", by_content["I moved to Bergen last month."]["id"]),
    ]
    client = await connect_client(api.settings)
    described = await client.get_workflow_handle(answer["workflow_id"]).describe()
    assert described.parent_id == got["workflow_id"], "the conversation ran as the import's child"
    # Claim checks: no history, decoded, holds a line's text (the control: the import's id is found).
    assert got["workflow_id"] in await decoded_histories_containing(client, got["import_id"].encode())
    for said_text in (b"Bergen", b"red drawer"):
        assert await decoded_histories_containing(client, said_text) == []

    # The same file again is the same import; the same lines in a new file store nothing twice.
    code, second = await cli(api, path, api.token(t, "lena"))
    assert code == 0 and import_id_of(second) == got["import_id"]
    more = [*CONVERSATION_FILE, line("Lena's bike is the blue one")]
    rerun, _ = await import_lines(api, http, tmp_path / "again.ndjson", more, t, "lena")
    assert rerun["counts"] == {"ADD": 3, "UPDATE": 0, "NOOP": 3, "PENDING": 0, "REJECT": 1, "ERROR": 3}
    replayed = await api.store.import_outcomes_between(rerun["import_id"], 2, 6)
    assert [(o.line_no, o.decision, o.reason) for o in replayed if o.line_no in (2, 6)] == [
        (2, "ADD", "replayed"),
        (6, "ADD", "replayed"),
    ]
    assert len(await live_contents(http, lena)) == 6
    events = await audit_events(api, http, t)
    assert sum(e["operation"] in ("create", "update") for e in events) == 7  # the new line's, and no other
    assert sum(e["operation"] == "deny" for e in events) == 2


async def test_a_conversation_lines_retried_batch_and_repeated_child_record_it_once(
    api: Api, http: httpx.AsyncClient
) -> None:
    """Worse than a crash can do: the batch that hands the line over runs twice, the child runs, then batch and
    child run again (as a re-run of the line would) before the outcome is recorded, and the recording too
    runs twice. The line is recorded once, its candidates stored and audited once, the counts right."""
    t = tenant()
    mo = api.auth(t, "mo")
    body = (talk("s-retry", LENA_TALKS) + "\n" + line("Mo keeps the spare key in the blue jar") + "\n").encode()
    created = await http.post(
        "/v1/imports", headers=mo, json={"sha256": hashlib.sha256(body).hexdigest(), "total_lines": 2}
    )
    import_id = created.json()["import_id"]
    put = await http.put(
        f"/v1/imports/{import_id}/lines",
        headers=mo | {"Content-Type": "application/x-ndjson"},
        params={"first_line": 1},
        content=body,
    )
    assert put.status_code == 200 and put.json()["received"] == 2, put.text
    await api.store.set_import_status(import_id, "running", expect=("uploading",), at=_now())
    activities = ImportActivities(api.deps, RememberActivities(api.deps))
    client = await connect_client(api.settings)
    job = ImportBatch(
        import_id=import_id, tenant_id=t, position=1, limit=100, policy=DEFAULT_POLICY, conversations=True
    )

    async def hand_over_and_run() -> ConversationResult:
        first = await ActivityEnvironment().run(activities.import_batch, job)
        retried = await ActivityEnvironment().run(activities.import_batch, job)
        for handed in (first, retried):
            assert handed.conversation is not None and not handed.done and handed.next_position == 2
        assert first.conversation is not None and retried.conversation is not None
        assert first.conversation.workflow_id == retried.conversation.workflow_id
        return await client.execute_workflow(
            ConversationWorkflow.run,
            args=[retried.conversation.request, DEFAULT_POLICY],
            id=retried.conversation.workflow_id,
            task_queue=api.settings.temporal_task_queue,
            result_type=ConversationResult,
        )

    ran = await hand_over_and_run()
    assert [o.reason for o in ran.outcomes] == ["accepted", "accepted", "slot_value_changed"]
    repeated = await hand_over_and_run()
    assert [o.reason for o in repeated.outcomes] == ["replayed"] * 3  # nothing applied again
    decided = []
    for result in (repeated, ran):
        done = ConversationLineDone(import_id=import_id, tenant_id=t, line_no=1, result=result)
        for _ in range(2):
            decided.append((await ActivityEnvironment().run(activities.import_conversation_line, done)).decision)
    assert decided == ["ADD"] * 4
    [outcome] = await api.store.import_outcomes_between(import_id, 1, 1)
    assert (outcome.decision, outcome.reason) == (
        "ADD",
        "replayed",
    )  # the first recording's; the others changed nothing
    rest = await ActivityEnvironment().run(activities.import_batch, job.model_copy(update={"position": 2}))
    assert rest.done and rest.counts == {"ADD": 1} and rest.conversation is None
    assert await api.store.import_counts(import_id) == {"ADD": 2}
    rows = (await http.get("/v1/memories", headers=mo, params={"status": ["active", "superseded"]})).json()["items"]
    assert len(rows) == 4  # Oslo (superseded), jazz, Bergen, the key
    events = await audit_events(api, http, t)
    assert sorted(e["memory_id"] for e in events if e["operation"] in ("create", "update")) == sorted(
        m["id"] for m in rows
    )


async def test_memwarden_import_takes_its_token_from_the_environment_or_a_file_never_argv(
    api: Api, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    t = tenant()
    path = tmp_path / "token.ndjson"
    path.write_text(line("Nia waters the orchids on Fridays") + "\n")
    token = api.token(t, "nia")
    command = ["-m", "stack.cli", "import", str(path), "--url", api.base_url]
    code, _, err = await memwarden_cli([*command, "--token", token], env={})
    assert code == 2 and "--token is refused" in err and "MEMWARDEN_TOKEN" in err and "--token-file" in err
    assert token not in err
    code, _, err = await memwarden_cli(command, env={})
    assert code == 2 and "no token: set MEMWARDEN_TOKEN or pass --token-file" in err
    code, _, err = await memwarden_cli([*command, "--token-file", str(tmp_path / "missing")], env={})
    assert code == 2 and "cannot read --token-file" in err
    (tmp_path / "token").write_text(token + "\n")
    code, out, err = await memwarden_cli([*command, "--token-file", str(tmp_path / "token")], env={})
    assert code == 0, err
    assert "decided 1 of 1 lines: ADD 1" in out
    code, out, err = await memwarden_cli(command, env={"MEMWARDEN_TOKEN": token})
    assert code == 0 and "decided 1 of 1 lines: ADD 1" in out, err  # the same file: the same import
    assert await live_contents(http, api.auth(t, "nia")) == ["Nia waters the orchids on Fridays"]


async def memwarden_cli(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """`python -m stack.cli ...` as a child process, without the caller's MEMWARDEN_TOKEN unless given."""
    base = {k: v for k, v in os.environ.items() if k != "MEMWARDEN_TOKEN"}
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        *args,
        env=base | {"PYTHONPATH": str(REPO_ROOT)} | env,
        cwd=REPO_ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(child.communicate(), 120)
    return int(child.returncode or 0), out.decode(), err.decode()


def test_a_conversation_lines_decision_is_the_strongest_of_its_candidates() -> None:
    from memwarden.records import CandidateOutcome, ConversationResult, Decision, MemoryType, Scope
    from memwarden.services.conversations import ConversationTarget, ImportedConversation
    from memwarden.services.imports import conversation_outcome

    line_ = ImportedConversation(
        session_id="s",
        received_at=_now(),
        messages=[],
        kept=[0, 2, 3],
        withheld={1: "secret_detected"},
        target=ConversationTarget("t", "o", Scope.USER, None, None, "user:o", "p"),
    )

    def outcome(*decided: tuple[int, Decision, str]) -> tuple[str, str, str | None, str | None]:
        result = ConversationResult(
            extractor="rules",
            outcomes=[
                CandidateOutcome(
                    message_index=i, kind="fact", type=MemoryType.FACT, decision=d, reason=r, memory_id=f"m{i}"
                )
                for i, d, r in decided
            ],
        )
        o = conversation_outcome(line_, ConversationLineDone(import_id="i", tenant_id="t", line_no=7, result=result))
        assert o.line_no == 7
        return o.decision, o.reason, o.field, o.memory_id

    assert outcome((2, Decision.UPDATE, "slot_value_changed"), (1, Decision.ADD, "accepted")) == (
        "ADD",
        "accepted",
        None,
        "m1",
    )
    assert outcome((2, Decision.PENDING, "staged_inferred"), (0, Decision.NOOP, "duplicate")) == (
        "PENDING",
        "staged_inferred",
        None,
        "m2",
    )
    # Nothing changed and something refused: REJECT, naming the first refused message in the line's numbering
    # (the withheld message 1 comes before the parked message 2, which is the line's message 3).
    assert outcome((2, Decision.REJECT, "pii_detected"), (0, Decision.NOOP, "duplicate")) == (
        "REJECT",
        "secret_detected",
        "messages.1.content",
        None,
    )
    bare = line_.model_copy(update={"withheld": {}})
    line_, saved = bare, line_
    assert outcome((2, Decision.REJECT, "pii_detected")) == ("REJECT", "pii_detected", "messages.3.content", "m2")
    assert outcome((0, Decision.NOOP, "duplicate")) == ("NOOP", "duplicate", None, "m0")
    assert outcome() == ("NOOP", "nothing_extracted", None, None)
    line_ = saved
    failed = ConversationLineDone(import_id="i", tenant_id="t", line_no=7, failure="conversation_failed")
    assert conversation_outcome(line_, failed).decision == "ERROR"


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)
