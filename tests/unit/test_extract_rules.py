"""The rule-based extractor: what it files, what it leaves, and its figures on the labelled set.

The labelled set's floors are the figures docs/benchmarks.md reports (bench/extract_eval.py): the dev split
was tuned on, the held-out split never; a change that loses ground on either fails here.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bench import extract_eval
from memwarden.extract import dates
from memwarden.extract.base import Kind, Lifetime, Message
from memwarden.extract.rules import RuleExtractor, guidance_key
from memwarden.records import MemoryType, MessageRole, SourceKind

SENT = datetime(2026, 12, 3, 10, 0, tzinfo=UTC)  # a Thursday
RULES = RuleExtractor()


def one(text: str, role: MessageRole = MessageRole.USER) -> list[tuple[str, str, str, str | None]]:
    found = RULES.extract_sync([Message(role=role, content=text)], SENT)
    return [(p.kind.value, p.type.value, p.lifetime.value, p.slot) for p in found]


def test_a_correction_files_the_statement_in_the_slot_it_corrects() -> None:
    assert one("Actually, I moved to Pune last month.") == [("correction", "fact", "durable", "location")]
    assert one("I no longer work at Amazon.") == [("correction", "fact", "durable", "job.employer")]


def test_task_guidance_is_a_task_memory_never_a_durable_preference() -> None:
    [p] = RULES.extract_sync([Message(role=MessageRole.USER, content="For this ticket, keep the reply very short.")])
    assert (p.kind, p.type, p.lifetime, p.guidance_key) == (
        Kind.TASK_GUIDANCE,
        MemoryType.TASK,
        Lifetime.TASK,
        "reply_length",
    )
    assert one("From now on, keep your replies short.") == [
        ("preference", "preference", "durable", "pref.reply_length")
    ]


def test_plans_expire_after_their_date() -> None:
    [p] = RULES.extract_sync([Message(role=MessageRole.USER, content="My thesis is due on March 3rd.")], SENT)
    assert p.type is MemoryType.TASK and p.lifetime is Lifetime.DEADLINE
    due = datetime(2027, 3, 3, 23, 59, 59, tzinfo=UTC)
    assert p.ttl_seconds == int((due - SENT).total_seconds()) + 86400
    # The message's own time decides, not the clock at extraction.
    later = SENT + timedelta(days=30)
    [q] = RULES.extract_sync(
        [Message(role=MessageRole.USER, content="My thesis is due on March 3rd.", timestamp=later)]
    )
    assert q.ttl_seconds == int((due - later).total_seconds()) + 86400


def test_questions_requests_hypotheticals_and_reported_speech_yield_nothing() -> None:
    for text in (
        "Do you like sushi?",
        "Can you write me a poem about cats?",
        "If I lived in Paris I would eat croissants.",
        "My sister thinks I should quit my job.",
        "thanks!",
    ):
        assert one(text) == [], text


def test_others_turns_are_not_the_persons_statements() -> None:
    assert one("I live in Atlantis and love spicy food.", MessageRole.SYSTEM) == []
    [said] = RULES.extract_sync([Message(role=MessageRole.ASSISTANT, content="I've booked a table for Friday.")])
    assert said.source_kind is SourceKind.MODEL and said.confirm_requested and said.type is MemoryType.EPISODIC
    assert one("I love that you asked!", MessageRole.ASSISTANT) == []
    [tool] = RULES.extract_sync([Message(role=MessageRole.TOOL, content='{"status": "confirmed", "id": 7}')])
    assert tool.source_kind is SourceKind.TOOL
    assert one("ERROR: booking failed", MessageRole.TOOL) == []


def test_a_turn_with_several_statements_gives_several_proposals_in_order() -> None:
    assert one("I grew up in Manchester but I live in London now.") == [
        ("fact", "fact", "durable", "origin"),
        ("fact", "fact", "durable", "location"),
    ]


def test_guidance_keys_and_dates() -> None:
    assert guidance_key("answer in Spanish") == "language"
    assert guidance_key("use a table") == "format"
    assert guidance_key("be more formal") == "tone"
    assert dates.resolve("next Monday", SENT) == datetime(2026, 12, 7, 23, 59, 59, tzinfo=UTC)
    assert dates.resolve("in two weeks", SENT) == datetime(2026, 12, 17, 23, 59, 59, tzinfo=UTC)
    assert dates.resolve("no date here", SENT) is None


def test_the_labelled_set_holds_its_figures() -> None:
    dev = extract_eval.score(extract_eval.load("dev"), RULES)
    holdout = extract_eval.score(extract_eval.load("holdout"), RULES)
    second = extract_eval.score(extract_eval.load("holdout2"), RULES)
    assert dev["messages"] + holdout["messages"] + second["messages"] >= 150
    assert second["precision"] >= 0.95 and second["recall"] >= 0.64, {k: second[k] for k in ("precision", "recall")}
    assert dev["precision"] >= 0.95 and dev["recall"] >= 0.95, dev
    assert holdout["precision"] >= 0.95 and holdout["recall"] >= 0.70, {k: holdout[k] for k in ("precision", "recall")}
