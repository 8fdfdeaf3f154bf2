"""The pure parts of bench/peers.py: the workload every system gets, how recall is scored, the order the
systems are measured in. None of it needs a peer installed (bench/peer_systems.py is never imported)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench import peers
from bench.locomo import Corpus, Question, Turn, evidence_ids, load_corpus, turn_body, turn_text
from bench.stack import cpu_by_part, percentile, summary_ms


def _sample(sessions: dict[str, list[tuple[str, str, str]]], qa: list[dict[str, Any]]) -> dict[str, Any]:
    conversation: dict[str, Any] = {"speaker_a": "A", "speaker_b": "B"}
    for name, turns in sessions.items():
        conversation[name] = [{"speaker": who, "dia_id": dia, "text": text} for dia, who, text in turns]
        conversation[f"{name}_date_time"] = "1:00 pm on 8 May, 2023"
    return {"conversation": conversation, "qa": qa}


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    """Two conversations; the first has sessions 1, 2 and 10 (so "session_10" sorts before "session_2")."""
    first = _sample(
        {
            "session_1": [("D1:1", "Ann", "hello"), ("D1:2", "Bo", "hi there")],
            "session_10": [("D10:1", "Ann", "late news")],
            "session_2": [("D2:1", "Bo", "second talk"), ("D2:2", "Ann", "more")],
        },
        [
            {"question": "q early", "answer": "a", "evidence": ["D1:2"], "category": 4},
            {"question": "q spans", "answer": "a", "evidence": ["D1:1; D2:2"], "category": 1},
            {"question": "q late", "answer": "a", "evidence": ["D10:1"], "category": 2},
            {"question": "q adversarial", "answer": "a", "evidence": ["D1:1"], "category": 5},
        ],
    )
    second = _sample(
        {"session_1": [("D1:1", "Cy", "other owner's start"), ("D1:2", "Di", "and reply")]},
        [{"question": "q second", "answer": "a", "evidence": ["D1:2"], "category": 3}],
    )
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([first, second]))
    return load_corpus(path)


def test_turns_are_formatted_as_locomo_formats_them() -> None:
    assert turn_text({"speaker": "Ann", "text": "look"}) == "Ann: look"
    assert turn_text({"speaker": "Ann", "text": "look", "blip_caption": "a dog"}) == "Ann: look [image: a dog]"


def test_owner_turns_follow_the_conversations_in_order(corpus: Corpus) -> None:
    order = [(t.conv, t.dia_id) for t in peers.owner_turns(corpus, 100)]
    assert order == [(0, "D1:1"), (0, "D1:2"), (0, "D2:1"), (0, "D2:2"), (0, "D10:1"), (1, "D1:1"), (1, "D1:2")]
    assert [(t.conv, t.dia_id) for t in peers.owner_turns(corpus, 3)] == order[:3]


def test_every_turn_is_one_owners_with_a_session_per_conversation(corpus: Corpus) -> None:
    entries = [peers.turn_entry(t) for t in peers.owner_turns(corpus, 100)]
    assert {e.owner for e in entries} == {peers.OWNER}
    assert len({e.key for e in entries}) == len(entries)  # conversations reuse dia ids; keys must not collide
    first, other = entries[0], entries[5]
    assert first.meta["session"] != other.meta["session"]  # both were "session_1"
    assert first.text == "Ann: hello" and first.meta == {"session": "conv0/session_1", "turn": "D1:1", "speaker": "Ann"}
    body = turn_body(other.turn, session=other.meta["session"])  # type: ignore[arg-type]
    assert body["provenance"] == {"session": "conv1/session_1", "turn": "D1:1", "speaker": "Cy"}
    assert body["content"] == "Cy: other owner's start" and body["idempotency_key"] == "locomo-1-D1:1"


def test_empty_provenance_fields_are_left_out() -> None:
    body = turn_body(Turn(0, "D1:1", "session_1", "text", speaker=""))
    assert body["provenance"] == {"session": "session_1", "turn": "D1:1"}


def test_questions_are_those_whose_evidence_lies_within_the_turns(corpus: Corpus) -> None:
    three = peers.owner_turns(corpus, 3)  # D1:1, D1:2, D2:1 of conversation 0
    assert [q.text for q in peers.select_questions(corpus, three, 10, seed=1)] == ["q early"]
    five = peers.owner_turns(corpus, 5)
    assert [q.text for q in peers.select_questions(corpus, five, 10, seed=1)] == ["q early", "q spans", "q late"]
    everything = peers.owner_turns(corpus, 100)
    chosen = [q.text for q in peers.select_questions(corpus, everything, 10, seed=1)]
    assert "q adversarial" not in chosen  # category 5 never
    assert chosen == ["q early", "q spans", "q late", "q second"]


def test_a_sample_of_questions_is_seeded_and_keeps_the_datas_order(corpus: Corpus) -> None:
    everything = peers.owner_turns(corpus, 100)
    order = [q.text for q in corpus.questions]
    drawn = [q.text for q in peers.select_questions(corpus, everything, 2, seed=7)]
    assert len(drawn) == 2 and drawn == sorted(drawn, key=order.index)
    assert drawn == [q.text for q in peers.select_questions(corpus, everything, 2, seed=7)]
    draws = {tuple(q.text for q in peers.select_questions(corpus, everything, 2, seed=s)) for s in range(20)}
    assert len(draws) > 1  # the seed matters


def test_recall_at_5_counts_evidence_among_the_first_five() -> None:
    evidence = [{"a", "b"}, {"c"}, {"d"}]
    ranked = [["a", "x", "y", "z", "w", "b"], ["q", "r", "s", "t", "c"], []]
    # (1/2 + 1 + 0) / 3
    assert peers.mean_recall(ranked, evidence) == 0.5
    assert peers.mean_recall([], []) == 0.0


def test_evidence_the_system_did_not_store_counts_as_missed() -> None:
    mapping = {(0, "D1:1"): "m1"}
    q = Question(0, "q", 1, ["D1:1", "D1:2"])
    evidence = evidence_ids(mapping, q)
    assert "m1" in evidence and len(evidence) == 2
    assert peers.mean_recall([["m1", "m2"]], [evidence]) == 0.5


def test_every_system_goes_first_in_turn() -> None:
    names = ["a", "b", "c"]
    rounds = [peers.rotation(names, i) for i in range(3)]
    assert rounds == [["a", "b", "c"], ["b", "c", "a"], ["c", "a", "b"]]
    assert peers.rotation(names, 3) == names
    assert peers.rotation([], 4) == []


def test_clients_share_the_requests() -> None:
    assert peers.per_client(160, 8) == 20
    assert peers.per_client(160, 1) == 160
    assert peers.per_client(3, 8) == 1


def test_every_system_gets_the_same_concurrent_writes() -> None:
    texts = peers.load_texts(11, 4, 5)
    assert [len(t) for t in texts] == [5, 5, 5, 5]
    assert texts == peers.load_texts(11, 4, 5)
    assert texts != peers.load_texts(12, 4, 5)
    assert all("person 2" in text for text in texts[2])


def test_percentiles_are_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50.0 and percentile(values, 95) == 95.0
    assert summary_ms([0.010, 0.020, 0.030]) == {"p50": 20.0, "p95": 30.0, "mean": 20.0}


def _result() -> dict[str, Any]:
    row = {
        "label": "memwarden (HTTP, a workflow per operation)",
        "add_ms": {"p50": 30.0, "p95": 90.0, "mean": 40.0},
        "ingest_s": 12.0,
        "search_ms": {"p50": 35.0, "p95": 45.0, "mean": 36.0},
        "recall@5": 0.5,
        "searchable_after": {"p50_ms": 70.0, "missed": 0},
        "cpu_ms_per_add": 50.0,
        "cpu_ms_per_search": 40.0,
        "searches_per_s": {"1": 20.0, "8": 30.0},
        "writes_per_s": {"1": 15.0, "8": 25.0},
        "requests": {"1": 160, "8": 160},
        "search_failures": {"1": 0, "8": 0},
        "write_failures": {"1": 0, "8": 0},
        "notes": [],
        "decisions_on_turns": {"ADD": 290, "PENDING": 10, peers.CONFIRMED: 10},
    }
    peer = {
        **row,
        "label": "mem0, faiss",
        "searchable_after": {"p50_ms": None, "missed": 3},
        "notes": ["dense only"],
        "warnings": {"writes at 8 clients: Failed to save FAISS index": 2},
        "errors": {"searches at 8 clients: OperationalError: cannot start a transaction": 7},
        "search_failures": {"1": 0, "8": 7},
        "searches_after_concurrent_writes": "IndexError: index 887 is out of bounds",
    }
    del peer["decisions_on_turns"]
    return {
        "k": 5,
        "clients": [1, 8],
        "versions": {"mem0ai": "2.2.1"},
        "python_loop_ms": 55.0,
        "load_average_1min": 2.0,
        "not_run": {"mem0 REST server": ["no docker on PATH"]},
        "results": {"300": {"questions": 40, "systems": {"memwarden": row, "mem0-faiss": peer}}},
    }


def test_the_published_section_has_a_row_per_system_and_says_what_did_not_run(tmp_path: Path) -> None:
    plot = tmp_path / "peers-recall.png"
    text = peers.markdown(_result(), {"R@5 per system": plot, "missing": tmp_path / "none.png"})
    lines = text.splitlines()
    assert lines[0].startswith("| system | N | add p50 / p95 ms")
    row = "| memwarden (HTTP, a workflow per operation) | 300 | 30.0 / 90.0 | 12.0 | 70.0 | 35.0 / 45.0 | 30.0 | 25.0 |"
    assert row + " 0.5 | 50.0 | 40.0 |" in lines
    assert "not found (3 tries)" in text
    assert "290 ADD, 10 PENDING (10 PENDING confirmed by the owner)" in text
    assert "Not run: mem0 REST server, because no docker on PATH." in text
    assert "logged 2x under writes at 8 clients: Failed to save FAISS index" in text
    assert "| 30.0 (7 of 160 failed) | 25.0 |" in text  # a rate never hides its failures
    assert "7 calls raised under searches at 8 clients: OperationalError" in text
    assert "after the concurrent writes, a search raises IndexError: index 887 is out of bounds." in text
    assert text.count("after the concurrent writes") == 1  # memwarden's store answered
    assert "Plots:" not in text  # a plot that was not drawn is not linked
    plot.write_bytes(b"png")
    assert "[R@5 per system](" in peers.markdown(_result(), {"R@5 per system": plot})


def test_mem0s_server_is_reported_with_the_reasons_it_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(peers.shutil, "which", lambda _: None)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    reasons = peers.mem0_server_status()
    assert "no docker on PATH" in reasons
    assert any("OPENAI_API_KEY" in r for r in reasons)


def test_cpu_is_counted_for_the_process_asked_about_and_a_child_is_not_this_ones() -> None:
    """memwarden runs as a child: its CPU is read from its own /proc entries, and a peer's (this process's)
    figure leaves the child out."""
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass\ntime.sleep(30)"
    child = subprocess.Popen([sys.executable, "-c", burn])
    try:
        deadline = time.monotonic() + 20
        while cpu_by_part(child.pid)["event loop"] < 0.25 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert cpu_by_part(child.pid)["event loop"] >= 0.25
        assert cpu_by_part()["writers"] >= 0.25  # from here, the child is one of this process's children
        assert cpu_by_part(child.pid)["writers"] == 0  # it has no children of its own
    finally:
        child.kill()
        child.wait()
    assert cpu_by_part(child.pid) == Counter()  # gone: nothing to count
