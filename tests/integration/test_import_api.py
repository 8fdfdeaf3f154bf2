"""Bulk import over real HTTP: `memwarden import FILE` against the embedded stack, through the same gate.

Bad lines (not JSON, a missing field, oversized, a secret, a conversation this build does not apply)
are reported by number and never stop the rest; the same file twice applies nothing twice; a batch
retried after its commit landed applies nothing again; PENDING lines open their confirmation window;
only the principal that started an import (and the tenant's operators) may read it. Every text is
synthetic.
"""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import uuid
from pathlib import Path
from typing import Any

import httpx
from temporalio.testing import ActivityEnvironment

from activities.imports import ImportActivities
from activities.remember import RememberActivities
from memwarden.policy.gate import DEFAULT_POLICY
from memwarden.policy.imports import ImportBatch
from memwarden.records import Status
from memwarden.services.imports import batch_cut
from stack.import_cli import Progress, chunks, file_lines, run_import
from tests.integration.api_stack import Api, assert_problem

FACT = {"type": "fact", "source_kind": "user", "reason": "user_stated_fact", "importance": 0.8}
SECRET = "the deploy key is AKIAZ7QXW3SYNTH5EXMP, keep it handy"


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


async def test_bad_lines_are_reported_by_number_and_the_rest_apply(
    api: Api, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    t = tenant()
    alice = api.auth(t, "alice")
    path = tmp_path / "mixed.ndjson"
    path.write_text(
        "\n".join(
            [
                line("Alice keeps her passport in the blue folder"),  # 1
                '{"content": "Alice likes',  #  2: not JSON
                json.dumps({"content": "Alice was born in Lisbon", "source_kind": "user", "reason": "x"}),  # 3: no type
                line("A" * 5000),  # 4: over max_content_chars
                line(SECRET),  # 5: the gate rejects it
                line("Alice takes the 7:40 train to work", slot="commute"),  # 6
                json.dumps({"session_id": "s-1", "messages": [{"role": "user", "content": "hi"}]}),  # 7
                "",  # 8: blank
                "[1, 2]",  # 9: not an object
                line("Alice's desk is on the fourth floor", source_kind="system"),  # 10: a user may not declare system
                line("Alice runs on Tuesdays and Thursdays"),  # 11
            ]
        )
        + "\n"
    )
    code, output = await cli(api, path, api.token(t, "alice"))
    assert code == 0, output
    got = await state_of(http, alice, import_id_of(output))
    assert got["status"] == "done" and got["total_lines"] == 11 and got["done_lines"] == 11
    assert got["position"] == 12
    reported = {(e["line"], e["decision"], e["reason"], e["field"]) for e in got["errors"]}
    assert reported == {
        (2, "ERROR", "invalid_json", None),
        (3, "ERROR", "validation_failed", "type"),
        (4, "ERROR", "content_too_large", "content"),
        (5, "REJECT", "secret_detected", None),
        (7, "ERROR", "unsupported_line_kind", None),
        (8, "ERROR", "blank_line", None),
        (9, "ERROR", "not_an_object", None),
        (10, "ERROR", "source_kind_not_allowed", "source_kind"),
    }
    assert got["counts"] == {"ADD": 3, "UPDATE": 0, "NOOP": 0, "PENDING": 0, "REJECT": 1, "ERROR": 7}
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
    assert [e["line"] for e in rest["errors"]] == [5, 7, 8, 9, 10] and rest["next_errors_after"] is None
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


def _now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)
