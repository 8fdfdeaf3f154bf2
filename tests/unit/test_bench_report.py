"""bench.report rewrites one marker-delimited section of the benchmarks document and nothing else."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench import report

DOC = """# Benchmarks

Prose before, kept as it is.

## Search

<!-- bench:latency -->
_Measured 2026-12-02 04:17 UTC at commit `226ea38` on x86_64, 2 cores._

| old | table |
|---|---|
| 1 | 2 |
<!-- /bench:latency -->

Prose between the sections.

## Remember

<!-- bench:remember -->
_Measured 2026-12-01 23:24 UTC at commit `928a2d3` on x86_64, 2 cores._

the remember figures
<!-- /bench:remember -->

Prose after.
"""

FIXED = report.Stamp(date="2027-01-02 03:04 UTC", commit="abc1234", machine="x86_64, 2 cores, Python 3.11")


def test_section_replaced_and_everything_else_untouched(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text(DOC)
    report.publish("latency", report.table(["size", "p50 ms"], [["10,000", 39.6]]), path=doc, when=FIXED)
    text = doc.read_text()

    begin, end = text.index("<!-- bench:latency -->"), text.index("<!-- /bench:latency -->")
    section = text[begin:end]
    assert "| old | table |" not in text
    assert "| size | p50 ms |\n|---|---|\n| 10,000 | 39.6 |" in section
    assert "_Measured 2027-01-02 03:04 UTC at commit `abc1234` on x86_64, 2 cores, Python 3.11._" in section
    # Outside the section, byte for byte what was there.
    old_begin = DOC.index("<!-- bench:latency -->")
    old_end = DOC.index("<!-- /bench:latency -->")
    assert text[:begin] == DOC[:old_begin]
    assert text[end:] == DOC[old_end:]


def test_a_new_section_is_appended(tmp_path: Path) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text(DOC)
    report.publish("forget", "forgotten fast", path=doc, when=FIXED)
    text = doc.read_text()
    assert text.startswith(DOC.rstrip())
    assert text.endswith("<!-- bench:forget -->\n" + FIXED.line() + "\n\nforgotten fast\n<!-- /bench:forget -->\n")
    # Publishing it again replaces, never duplicates.
    report.publish("forget", "forgotten faster", path=doc, when=FIXED)
    again = doc.read_text()
    assert again.count("<!-- bench:forget -->") == 1
    assert "forgotten faster" in again and "forgotten fast\n" not in again


@pytest.mark.parametrize(
    "broken",
    [
        DOC.replace("<!-- /bench:latency -->", ""),
        DOC.replace("<!-- bench:remember -->", "<!-- bench:latency -->"),
        DOC.replace("<!-- bench:latency -->", "").replace("<!-- /bench:remember -->", "<!-- bench:latency -->"),
    ],
)
def test_broken_markers_are_refused_not_guessed(tmp_path: Path, broken: str) -> None:
    doc = tmp_path / "benchmarks.md"
    doc.write_text(broken)
    with pytest.raises(ValueError, match="latency"):
        report.publish("latency", "x", path=doc, when=FIXED)
    assert doc.read_text() == broken


def test_section_names_are_checked() -> None:
    with pytest.raises(ValueError):
        report.render("Latency -->", "x", FIXED)


def test_stamp_names_the_commit_and_marks_a_dirty_tree(tmp_path: Path) -> None:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()

    git("init", "-q")
    (tmp_path / "f.txt").write_text("one\n")
    git("add", "f.txt")
    git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "one")
    head = git("rev-parse", "--short", "HEAD")

    made = report.stamp(datetime(2027, 1, 2, 3, 4, tzinfo=UTC), root=tmp_path)
    assert made.commit == head
    assert made.date == "2027-01-02 03:04 UTC"
    (tmp_path / "untracked.txt").write_text("not part of the code\n")
    assert report.commit(tmp_path) == head
    (tmp_path / "f.txt").write_text("two\n")
    assert report.commit(tmp_path) == f"{head}-dirty"


def test_outside_a_checkout_the_commit_is_unknown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert report.commit(tmp_path) == "unknown"


def test_machine_line_names_cores_memory_and_python() -> None:
    line = report.machine()
    assert " cores, " in line
    assert "GiB" in line or "unknown memory" in line
    assert "Python 3." in line
