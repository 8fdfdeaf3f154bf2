"""bench.report rewrites one marker-delimited section of the benchmarks document and nothing else."""

from __future__ import annotations

import re
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
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "benchmarks.md").write_text("figures\n")
    git("add", "docs/benchmarks.md")
    git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "docs")
    head = git("rev-parse", "--short", "HEAD")
    (tmp_path / "docs" / "benchmarks.md").write_text("figures a bench just published\n")
    assert report.commit(tmp_path) == head  # the documents do not change what is measured
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


# -- the real document -------------------------------------------------------------------------

SECTION = re.compile(r"<!-- bench:([a-z0-9_-]+) -->\n(.*?)\n<!-- /bench:\1 -->", re.S)
STAMP = re.compile(r"^_Measured \d{4}-\d{2}-\d{2} \d{2}:\d{2} UTC at commit `[0-9a-f]{7,}(-dirty)?` on .+\._$")


def test_every_section_of_the_benchmarks_document_is_closed_and_stamped() -> None:
    text = report.DOC.read_text()
    sections = SECTION.findall(text)
    assert sections, "docs/benchmarks.md has no bench sections"
    names = [name for name, _ in sections]
    assert len(names) == len(set(names)), "a section appears twice"
    opening, closing = re.findall(r"^<!-- bench:", text, re.M), re.findall(r"^<!-- /bench:", text, re.M)
    assert len(opening) == len(closing) == len(names), "an unclosed or stray marker"
    for name, body in sections:
        first = body.splitlines()[0]
        assert STAMP.match(first), f"section {name!r} does not start with a stamp: {first!r}"
        assert "|---" in body, f"section {name!r} has no table"


def test_every_bench_that_publishes_has_its_section() -> None:
    """A bench's --publish names a section the document already has (a typo would append a stray one)."""
    names = {name for name, _ in SECTION.findall(report.DOC.read_text())}
    published: list[tuple[str, str]] = []
    for source in sorted((report.ROOT / "bench").glob("*.py")):
        text = source.read_text()
        published += [(source.name, n) for n in re.findall(r'publish\(\s*"([a-z0-9_-]+)"', text)]
        published += [(source.name, f"{p}-*") for p in re.findall(r'publish\(\s*f"([a-z0-9_]+)-\{', text)]
    assert len({file for file, _ in published}) >= 13, published
    for file, name in published:
        if name.endswith("-*"):
            assert any(n.startswith(name[:-1]) for n in names), f"{file} publishes {name}: no such section"
        else:
            assert name in names, f"{file} publishes {name!r}: no such section in docs/benchmarks.md"
