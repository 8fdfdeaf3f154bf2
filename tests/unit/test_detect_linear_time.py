"""Issue 21 part 7: detection is linear in its input and cheap on adversarial shapes at the maximum size.

Two halves. The prefilter (`memwarden.detect._prefilter`) lets a detector skip every pattern whose words
a text lacks; it must never skip one that would have matched, so its soundness is checked here against
every labelled text, every text of the detector tests, their other readings (normalised, de-obfuscated,
hidden, decoded), and generated splices of them. Then the whole `screen`, every detector together, is
timed on adversarial shapes built by hypothesis at the maximum content size, and its growth from 1k to
4k characters is held near linear.

Times are this thread's CPU time (`time.thread_time`), not wall time: the machine is shared, and what a
detector costs is its own CPU, not its neighbours'. Each timed screening starts with the per-text caches
cleared, so it pays for its normalisation like a new candidate does.
"""

from __future__ import annotations

import json
import string
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memwarden.config import Settings
from memwarden.detect import _prefilter, instructions, pii, screen, secrets, signals, warm_up
from memwarden.detect._prefilter import Prefilter, fold, required_literals
from memwarden.detect._text import normalise, normalise_spaced, smuggled_tags
from tests.unit import test_detect as detector_tests

DATA = Path(__file__).resolve().parent.parent / "data"
MAX_CHARS = Settings().max_content_chars
BOUND_MS = 50.0
"""The issue's bound for one screening at the maximum size, every detector together."""


def _texts() -> list[str]:
    out: list[str] = []
    for path in sorted(DATA.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line) if line.strip() else {}
            out.extend(v for k, v in row.items() if k in {"text", "a", "b", "content"} and isinstance(v, str))
    cases: list[Any] = [
        *detector_tests.SECRETS,
        *detector_tests.PII_CASES,
        *detector_tests.INJECTIONS,
        *detector_tests.BENIGN_LOOKALIKES,
        *detector_tests.CONFUSABLE_INJECTIONS,
        *detector_tests.FAILED,
        *detector_tests.NOT_FAILED,
        *detector_tests.BEHAVIOUR,
    ]
    out += [case if isinstance(case, str) else case[0] for case in cases]
    return list(dict.fromkeys(out))


TEXTS = _texts()


def _views(text: str) -> list[str]:
    """Every text a detector matches on for `text`: itself, its normalised readings and what assess decodes."""
    view = normalise(text)
    out = [text, view, normalise_spaced(text), *instructions._deobfuscated(text, view)]
    hidden = smuggled_tags(text)
    out += [normalise(hidden)] if hidden else []
    out += [instructions._hidden_texts(view)]
    out += [normalise(p) for p in instructions._decoded_payloads(view)]
    return [v for v in dict.fromkeys(out) if v]


def _plugin_matches(plugin: Any) -> Callable[[str], bool]:
    return lambda text: any(any(True for _ in plugin.analyze_string(line)) for line in text.splitlines())


def _families() -> dict[str, tuple[Prefilter, list[Callable[[str], bool]]]]:
    """Each prefiltered family: its prefilter and, in the same order, whether each of its patterns matches."""
    warm_up()
    fams: dict[str, tuple[Prefilter, list[Callable[[str], bool]]]] = {
        "instructions": (instructions._prefilter(), [p.search for _, _, p, _ in instructions._compiled()]),
        "secrets": (
            secrets._extra_prefilter(),
            [*(p.search for _, p in secrets._extra_patterns()), secrets._PROSE.search],
        ),
        "secret plugins": (secrets._plugin_prefilter(), [_plugin_matches(p) for _, p in secrets._plugins()]),
        "failed tool output": (signals._failure_words(), [signals._FAIL_STRONG.search, signals._FAIL_WEAK.search]),
        "directions": (
            signals._direction_words(),
            [lambda v: signals._read_directions(v) != signals.Directions()],
        ),
    }
    for rec in pii._Engine.get().registry.recognizers:
        words = getattr(rec, "_words", None)
        if words is not None:
            fams[f"pii {rec.name}"] = (words, [p.search for p, _ in rec._patterns])
    return fams


def _skipped_matches(texts: Iterable[str]) -> list[tuple[str, int, str]]:
    """(family, pattern index, text) for every pattern the prefilter would skip on a text it matches."""
    misses = []
    families = _families()
    for text in texts:
        for view in _views(text):
            for name, (words, matchers) in families.items():
                possible = words.possible(view)
                misses.extend((name, i, view[:80]) for i, m in enumerate(matchers) if not possible[i] and m(view))
    return misses


def test_the_prefilter_never_skips_a_pattern_that_matches_any_known_text() -> None:
    assert len(TEXTS) > 1000
    assert _skipped_matches(TEXTS) == []


def test_the_prefilter_skips_most_patterns_on_text_without_their_words() -> None:
    """It does work: on an adversarial shape almost nothing runs (this is what made `assess` ~30x cheaper)."""
    text = normalise(("a." * MAX_CHARS)[:MAX_CHARS])
    for name, (words, _) in _families().items():
        possible = words.possible(text)
        assert sum(possible) <= max(1, len(possible) // 10), (name, sum(possible), len(possible))


_WORDS = sorted({w for t in TEXTS for w in regex.findall(r"\S+", t)} | set(instructions._prefilter().anchors))


@settings(max_examples=150, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    parts=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=14),
    seps=st.lists(st.sampled_from([" ", " ", "\n", ", ", ": ", ". ", " - ", "'", '"', "\u200b", ""]), min_size=14),
    case=st.sampled_from([str, str.upper, str.title, str.swapcase]),
)
def test_the_prefilter_never_skips_a_pattern_that_matches_spliced_text(
    parts: list[str], seps: list[str], case: Callable[[str], str]
) -> None:
    """Words of every known text and of every rule, spliced in any order, case and spacing."""
    text = case("".join(p + s for p, s in zip(parts, seps, strict=False)))
    assert _skipped_matches([text]) == []


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        (r"foo|bar", [{"foo", "bar"}]),
        (r"(?i)\bIgnore\s+previous\b", [{"previous"}, {"ignore"}]),
        (r"instructions?", [{"instruction"}]),
        (r"a(?=bcd)x", [{"ax"}]),  # a lookahead's text is outside the match
        (r"(?:pass|pwd)\s*[:=]", [{"pass", "pwd"}, {":", "="}]),
    ],
)
def test_required_literals_reads_the_words_off_the_syntax(pattern: str, words: list[set[str]]) -> None:
    assert sorted(map(set, required_literals(pattern) or ()), key=sorted) == sorted(words, key=sorted)


@pytest.mark.parametrize("pattern", [r"\w+", r"x?", r"[^a]{3}", r"(?:a|\d)+", r"\p{L}foo", r"a*b*"])
def test_patterns_without_known_words_always_run(pattern: str) -> None:
    """No words known (or syntax only the `regex` module reads): the pattern runs on every text."""
    assert required_literals(pattern) is None
    assert Prefilter([required_literals(pattern)]).possible("") == (True,)


def test_case_folding_equates_everything_either_regex_engine_does() -> None:
    """The words are compared case-folded: every character a case-insensitive match equates with a word's
    character must fold to the same (else a match on "ſend" would be skipped for want of "send")."""
    everything = "".join(chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
    chars = {c for words, _ in _families().values() for w in words.anchors for c in w}
    import re

    for c in sorted(chars):
        for engine in (re, regex):
            equal = set(engine.findall(engine.escape(c), everything, engine.IGNORECASE))
            assert {fold(e) for e in equal} == {fold(c)}, (c, engine.__name__, sorted(equal))


# --- the whole screening on adversarial shapes ------------------------------------------------------------------

PUNCTUATION = [*string.punctuation, "…", "—", "–", "“", "”", "«", "»", "·", "¡", "¿"]
WORDS = ["a", "the", "the user", "ignore", "you", "your", "system", "AI", "assistant", "remember", "always",
         "never", "send", "to", "from now on", "previous", "instructions", "password", "pin", "key", "is", "dot",
         "at", "not", "do", "please", "call", "I", "Caroline:", "http://", "<!--", "approve", "without",
         "abandon", "ability"]  # fmt: skip
SHORT_UNITS = ["a.", "a ", "a-", "a!", "a?", "a;", "a:", "a,", "a\n", "a.b.", "I. ", "A. ", "1.", "1-", "1 ", "1:",
               "/1", "12.", "1.1.", "+1 ", "(1)", "a@", "a_", "a/", "x.y ", "aa.", "a.a "]  # fmt: skip
_UNITS = st.one_of(
    st.sampled_from(["\n", " ", "\t", "\r\n", "\u200b"]),
    st.sampled_from(PUNCTUATION),
    st.sampled_from(SHORT_UNITS),
    st.sampled_from(string.ascii_letters + string.digits),
    st.sampled_from(WORDS).map(lambda w: w + " "),
    st.sampled_from(WORDS).flatmap(lambda w: st.sampled_from([w + ".", w + "\n", w + ", ", w + "? "])),
    st.lists(st.sampled_from(PUNCTUATION + WORDS + [" ", "\n", "a", "1"]), min_size=2, max_size=5).map("".join),
)


def _run(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


@st.composite
def adversarial(draw: st.DrawFn, size: int = MAX_CHARS) -> str:
    """Content of `size` characters: one short unit repeated, or two runs one after the other."""
    first = draw(_UNITS)
    if draw(st.booleans()):
        return _run(first, size)
    second = draw(_UNITS)
    return _run(first, size // 2) + _run(second, size - size // 2)


def _clear_text_caches() -> None:
    """What a new candidate's text would find: nothing of it normalised, indexed or parsed yet."""
    for cached in (normalise, normalise_spaced, _prefilter.grams, _prefilter._folded, pii._is_global_ip):
        cached.cache_clear()


def screen_cpu_ms(text: str, runs: int = 2) -> float:
    """The whole screening of `text` (every detector), best of `runs`, each from cold per-text caches."""
    best = float("inf")
    for _ in range(runs):
        _clear_text_caches()
        start = time.thread_time()
        result = screen(text, source_kind="tool", budget_s=60)
        best = min(best, time.thread_time() - start)
        assert not result.deadline_exceeded
    return best * 1000


@pytest.fixture(scope="module", autouse=True)
def _warm() -> None:
    warm_up()
    screen_cpu_ms(_run("warm up a. 1. ", MAX_CHARS))


@settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(text=adversarial())
def test_the_whole_screening_is_under_50_ms_on_adversarial_shapes_at_the_maximum_size(text: str) -> None:
    assert len(text) == MAX_CHARS
    assert screen_cpu_ms(text) < BOUND_MS


WORST_SHAPES = ["1.", "12.", "1.1.", "a.", "a ", "a-", "the user ", "a:", "1-", "/1", "a\n", "I. ", "send "]
"""The slowest shapes measured (bench/detect_eval.py lists them), each a run of one unit."""


@pytest.mark.parametrize("unit", WORST_SHAPES, ids=repr)
def test_the_whole_screening_of_the_worst_shapes_is_under_50_ms(unit: str) -> None:
    assert screen_cpu_ms(_run(unit, MAX_CHARS), runs=3) < BOUND_MS


@pytest.mark.parametrize("unit", [*WORST_SHAPES, "\n", "<!--"], ids=repr)
def test_four_times_the_input_costs_at_most_about_four_times_the_time(unit: str) -> None:
    """Growth, not just a bound: from 1k to 4k characters the whole screening's time grows by less than 6x
    (linear is 4x; the cubic detector of the issue grew 64x). 1 ms of slack covers timer granularity."""
    small = min(screen_cpu_ms(_run(unit, MAX_CHARS // 4)) for _ in range(3))
    full = min(screen_cpu_ms(_run(unit, MAX_CHARS)) for _ in range(3))
    assert full < 6 * small + 1.0, (small, full)


if __name__ == "__main__":  # a quick table: python -m tests.unit.test_detect_linear_time [units...]
    warm_up()
    for unit in sys.argv[1:] or WORST_SHAPES:
        print(f"{unit!r:12} {screen_cpu_ms(_run(unit, MAX_CHARS), runs=3):6.1f} ms")
