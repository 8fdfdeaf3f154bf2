"""Secrets and identifiers the write gate must refuse, and numbers it must not: the issue-21 corpus.

`tests/data/secrets_identifiers_corpus.jsonl`: credentials in URLs, passwords and PINs in prose, bare
cloud secret keys and vendor tokens, BIP-39 seed phrases, e-mail addresses spelled out or plain, and
other direct identifiers (label `reject`), beside numbers that are not secrets (label `benign`: flight
numbers, versions, commit ids, quantities). The benign look-alikes of the injection corpus
(`injection_corpus.jsonl`, when it is there) are held to the same rule. Each text goes through the real
detectors and the real gate: a `reject` text is refused for a secret or for PII whatever its source; a
benign one is never refused for either.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from memwarden.detect import screen
from memwarden.detect import secrets as secret_detectors
from memwarden.detect.pii import _SPELLED_EMAIL
from memwarden.policy.gate import GateInput, GateReason, precheck
from memwarden.records import Decision, MemoryType, SourceKind

DATA = Path(__file__).resolve().parent.parent / "data"
CORPUS = DATA / "secrets_identifiers_corpus.jsonl"
INJECTION_CORPUS = DATA / "injection_corpus.jsonl"
FAMILIES = {"url_credentials", "password", "pin", "cloud_secret", "seed_phrase", "email"}
REFUSED = {GateReason.SECRET_DETECTED, GateReason.PII_DETECTED}


def rows(path: Path) -> list[dict[str, str]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def to_reject() -> list[dict[str, str]]:
    return [r for r in rows(CORPUS) if r["label"] == "reject"]


def benign() -> list[dict[str, str]]:
    mine = [r for r in rows(CORPUS) if r["label"] == "benign"]
    theirs = [r for r in rows(INJECTION_CORPUS) if r["label"] == "benign"] if INJECTION_CORPUS.exists() else []
    return mine + theirs


def gate(text: str, source: SourceKind) -> GateReason | None:
    """The gate's steps 1-4 for a fact proposed by `source`: the refusal's reason, or None."""
    fields = {SourceKind.USER: "user_stated_fact", SourceKind.TOOL: "tool_observation_unverified"}
    inp = GateInput(
        type=MemoryType.FACT,
        source_kind=source,
        reason=fields[source],
        content_chars=len(text),
        importance=0.8,
        screening=screen(text, source_kind=source),
    )
    decision = precheck(inp)
    if decision is None:
        return None
    assert decision.decision is Decision.REJECT
    return GateReason(decision.reason)


def test_the_corpus_is_as_large_as_the_issue_asks() -> None:
    refused = to_reject()
    assert len(refused) >= 60
    assert FAMILIES <= {r["family"] for r in refused}
    assert all(sum(r["family"] == f for r in refused) >= 5 for f in FAMILIES)
    mine = [r for r in rows(CORPUS) if r["label"] == "benign"]
    assert len(mine) >= 30
    texts = [r["text"] for r in rows(CORPUS)]
    assert len(set(texts)) == len(texts)


@pytest.mark.parametrize("row", to_reject(), ids=lambda r: r["family"])
def test_every_secret_and_identifier_is_refused(row: dict[str, str]) -> None:
    assert gate(row["text"], SourceKind.USER) in REFUSED


@pytest.mark.parametrize("row", benign(), ids=lambda r: r.get("family", "benign"))
def test_no_benign_look_alike_is_refused_for_a_secret_or_pii(row: dict[str, str]) -> None:
    screening = screen(row["text"], source_kind=SourceKind.TOOL)
    assert (screening.secrets, screening.pii) == ([], [])


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("postgres://admin:S3cretPass!@db.internal.example:5432/prod", "url_credentials"),
        ("the wifi pass is Tr0ub4dor&3", "password_in_text"),
        ("her Netflix login is alice / Summer2024!", "password_in_text"),
        ("The PIN for my debit card is 7734", "card_pin"),
        ("wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "cloud_secret_key"),
        (
            "abandon amount liar amount expire adjust cage candy arch gather drum buyer",
            "seed_phrase",
        ),
    ],
    ids=["url", "wifi pass", "login", "card pin", "aws secret", "seed"],
)
def test_the_issues_examples_are_each_named(text: str, code: str) -> None:
    assert code in secret_detectors.find_secrets(text)


@pytest.mark.parametrize(
    "text",
    [
        "postgres://app:${DB_PASSWORD}@db:5432/app",
        "https://docs.example.com/guide#install",
        "my boarding pass is in the drawer",
        "login is alice",
        "git sha 3f786850e387550fdab836ed7e6dc881de23001b",
        "abandon ability able about above absent absorb abstract absurd abuse access",
        "We walked along the river and talked about the trip, the food and the weather all day long",
    ],
    ids=["templated url", "plain url", "bus pass", "login only", "sha1", "eleven words", "prose"],
)
def test_near_misses_are_not_secrets(text: str) -> None:
    assert secret_detectors.find_secrets(text) == []


def test_an_invalid_checksum_needs_a_wallet_word() -> None:
    words = "abandon " * 11 + "abandon"  # twelve wordlist words, checksum wrong
    assert secret_detectors.find_secrets(words) == []
    assert secret_detectors.find_secrets(f"wallet recovery words: {words}") == ["seed_phrase"]


ADVERSARIAL = [
    "\n" * 4095,
    " " * 4095,
    "a" * 4095,
    "a " * 2047,
    "abandon " * 511,
    "pin " * 1023,
    "x://" + "a" * 4090,
    "x://a:" + "b" * 4089,
    "login is " + "a/" * 2040,
    "changed " + "a " * 2040,
    "password '" + "a" * 4080,
    "alice dot " * 409,
    "a at " * 819,
    "+" * 4095,
    "A1/" * 1365,
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_the_new_detectors_are_linear_on_adversarial_shapes(text: str) -> None:
    """Each pattern and scanner this corpus added, on the maximum content size, under 50 ms."""
    secret_detectors.warm_up()
    patterns = [p for code, p in secret_detectors._extra_patterns() if code in ("url_credentials", "card_pin")]
    patterns += [p for code, p in secret_detectors._extra_patterns() if code == "password_in_text"]
    patterns.append(re.compile(f"(?i){_SPELLED_EMAIL}"))
    scanners = [secret_detectors._scan_cloud_secret, secret_detectors._scan_seed_phrase]
    for pattern in patterns:
        start = time.perf_counter()
        pattern.search(text)
        assert time.perf_counter() - start < 0.05, pattern.pattern[:60]
    for scan in scanners:
        start = time.perf_counter()
        scan(text)
        assert time.perf_counter() - start < 0.05, scan.__name__
