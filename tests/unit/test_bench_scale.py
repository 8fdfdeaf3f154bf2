"""bench.scale's pure parts: the growth ratio against the target, the resident-memory reader, the owner's data."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench import scale
from bench.locomo import Corpus, Question, Turn


def test_growth_is_the_largest_size_over_the_smallest_whatever_the_order() -> None:
    assert scale.growth({1_000_000: 52.0, 10_000: 40.0, 100_000: 44.0}) == 1.3
    assert scale.growth({10_000: 40.0, 100_000: 36.0}) == 0.9


def test_growth_needs_two_sizes() -> None:
    assert scale.growth({10_000: 40.0}) is None
    assert scale.growth({}) is None


def test_the_target_is_at_most_1_3x() -> None:
    assert scale.meets_target(1.3) is True
    assert scale.meets_target(1.31) is False
    assert scale.meets_target(0.95) is True
    assert scale.meets_target(None) is None


STATUS = """Name:\tpython
VmPeak:\t 2000000 kB
VmHWM:\t  900000 kB
VmRSS:\t  512000 kB
RssAnon:\t  400000 kB
"""


def test_status_fields_are_read_by_exact_name() -> None:
    assert scale.status_kb(STATUS, "VmRSS") == 512_000
    assert scale.status_kb(STATUS, "VmHWM") == 900_000
    assert scale.status_kb(STATUS, "Rss") is None  # not RssAnon's value
    assert scale.status_kb(STATUS, "VmSwap") is None


def test_resident_memory_of_this_process_follows_what_it_touches() -> None:
    before = scale.memory_mb(os.getpid())
    assert before is not None and before > 10
    block = b"\x01" * (256 * 1024 * 1024)  # written, so resident
    during = scale.memory_mb(os.getpid())
    peak = scale.memory_mb(os.getpid(), "VmHWM")
    assert during is not None and during - before > 200
    assert peak is not None and peak >= during
    del block


def test_resident_memory_of_a_process_that_is_gone_is_none() -> None:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    assert scale.memory_mb(int(child.stdout)) is None


def _corpus() -> Corpus:
    return Corpus(
        turns=[
            Turn(0, "D1:1", "session_1", "Ann: hi", "Ann"),
            Turn(1, "D1:1", "session_1", "Bo: I moved to Oslo", "Bo"),
            Turn(1, "D1:2", "session_1", "Cy: when?", "Cy"),
            Turn(2, "D1:1", "session_1", "Di: no questions here", "Di"),
        ],
        questions=[
            Question(0, "Who said hi?", 1, ["D1:1"]),
            Question(1, "Where did Bo move?", 4, ["D1:1"]),
        ],
    )


def test_the_owner_data_is_one_conversation_and_nothing_of_the_others() -> None:
    data = scale.owner_data(_corpus(), 1)
    assert [t.content for t in data.turns] == ["Bo: I moved to Oslo", "Cy: when?"]
    assert [q.text for q in data.questions] == ["Where did Bo move?"]


@pytest.mark.parametrize("conv", [2, 5])
def test_a_conversation_without_turns_or_questions_is_refused(conv: int) -> None:
    with pytest.raises(ValueError, match=f"conversation {conv}"):
        scale.owner_data(_corpus(), conv)


def test_a_step_is_projected_at_the_rate_measured_so_far() -> None:
    assert scale.projected_s(50_000, 20.0, 900_000) == 360.0


def _row(p50: float, floor: float) -> dict[str, object]:
    return {
        "added": 9_300,
        "ingest_per_s": 5_000,
        "optimise_s": 2.0,
        "memory": {"bench_mb": 700.0, "bench_peak_mb": 720.0, "dev_server_mb": 240.0, "optimiser_peak_mb": 460},
        "search API": {"p50": p50, "p95": p50 * 1.5},
        "floor": {"p50": floor},
        "ratio p50 API/floor": round(p50 / floor, 2),
        "cpu_ms_per_search": 55.0,
        "R@5": 0.7,
        "rounds": 200,
        "questions": 191,
    }


def _run(results: dict[str, dict[str, object]], ratio: float | None) -> dict[str, object]:
    return {
        "owner": {"conversation": 7, "turns": 681, "memories": 670, "decisions": {"ADD": 670}, "seconds": 40.0},
        "wall_s": 300,
        "results": results,
        "growth p50": ratio,
        "growth p50 / floor p50": ratio,
        "meets target": scale.meets_target(ratio),
    }


def _markdown(run: dict[str, object]) -> str:
    return scale.markdown({"python_loop_ms": 55.0, "per_owner": 1000, "k": 5, "backends": {"sqlite": run}})


def test_the_published_section_states_the_growth_against_the_target() -> None:
    text = _markdown(_run({"10000": _row(50.0, 20.0), "1000000": _row(70.0, 20.0)}, 1.4))
    assert "| sqlite | 1,000,000 | 5,000 (9,300) | 2.0 | 700.0 / 240.0 | 70.0 / 105.0 | 20.0 | 55.0 | 0.7 |" in text
    assert "grew **1.4x** from 10,000 to 1,000,000 memories (target at most 1.3x: missed)" in text


def test_growth_is_over_the_sizes_measured_only() -> None:
    stopped = {"added": 50_000, "ingest_per_s": 2_000, "not_loaded": {"wanted": 900_000, "projected_s": 450}}
    got = scale.growths({"10000": _row(50.0, 20.0), "100000": _row(60.0, 25.0), "1000000": stopped})
    assert got == {"growth p50": 1.2, "growth p50 / floor p50": 0.96, "meets target": True}


def test_a_size_not_loaded_is_said_with_its_measured_rate() -> None:
    stopped = {
        "added": 50_000,
        "ingest_s": 25.0,
        "ingest_per_s": 2_000,
        "not_loaded": {"wanted": 900_000, "projected_s": 450},
    }
    text = _markdown(_run({"10000": _row(50.0, 20.0), "100000": _row(52.0, 20.0), "1000000": stopped}, 1.04))
    assert "| sqlite | 1,000,000 | 2,000 (of 50,000) | not loaded |" in text
    assert "at the 2,000/s measured over the first 50,000, the +900,000 would take 7.5 min" in text
    assert "grew **1.04x** from 10,000 to 100,000 memories (target at most 1.3x: met)" in text
