"""Publish a bench's figures into docs/benchmarks.md, one marker-delimited section per bench.

    <!-- bench:NAME -->
    _Measured <UTC time> at commit <short hash> on <machine>._
    ...the bench's markdown...
    <!-- /bench:NAME -->

Why a writer and not a hand-edited table: a figure is worth quoting only beside the code that produced
it and the machine it ran on, and a person copying numbers drops one or the other. `publish` replaces
only its own section (the prose around the markers and every other section stay byte for byte), so a
bench run with `--publish` is the whole of updating the document, and the diff shows exactly which
figures moved. Superseded figures are not kept here: git has them.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "benchmarks.md"
SECTION_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


@dataclass(frozen=True)
class Stamp:
    """When, from which code and on what machine a section's figures were measured."""

    date: str
    commit: str
    machine: str

    def line(self) -> str:
        return f"_Measured {self.date} at commit `{self.commit}` on {self.machine}._"


def commit(root: Path = ROOT) -> str:
    """`git rev-parse --short HEAD`, with "-dirty" when tracked files outside `docs/` differ from it (the
    figures then came from code no commit holds); "unknown" outside a git checkout. The documents are
    left out: a run that publishes rewrites docs/benchmarks.md, and the next bench measures the same code."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)docs"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head}-dirty" if changed else head


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _memory_gib() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return f"{int(line.split()[1]) / (1024 * 1024):.1f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    return "unknown memory"


def machine() -> str:
    """Cores this process may use, memory, CPU model and Python: what a reader needs to compare runs."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{platform.machine()}, {cores} cores, {_memory_gib()}, {_cpu_model()}, Python {platform.python_version()}"


def stamp(now: datetime | None = None, root: Path = ROOT) -> Stamp:
    when = (now or datetime.now(UTC)).astimezone(UTC)
    return Stamp(date=when.strftime("%Y-%m-%d %H:%M UTC"), commit=commit(root), machine=machine())


def _markers(name: str) -> tuple[str, str]:
    if not SECTION_NAME.match(name):
        raise ValueError(f"a section name is lower-case letters, digits, '-' and '_': {name!r}")
    return f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"


def render(name: str, body: str, when: Stamp) -> str:
    """The whole section, markers included."""
    begin, end = _markers(name)
    return f"{begin}\n{when.line()}\n\n{body.strip()}\n{end}"


def replace_section(text: str, name: str, section: str) -> str:
    """`text` with section `name` replaced by `section` (appended at the end when it is not there yet)."""
    begin, end = _markers(name)
    starts, ends = text.count(begin), text.count(end)
    if starts == 0 and ends == 0:
        return f"{text.rstrip()}\n\n{section}\n"
    if starts != 1 or ends != 1 or text.index(begin) > text.index(end):
        raise ValueError(f"docs/benchmarks.md: section {name!r} needs exactly one {begin} before one {end}")
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{section}{tail}"


def publish(name: str, body: str, *, path: Path = DOC, when: Stamp | None = None) -> Path:
    """Rewrite section `name` of the benchmarks document with `body`, stamped; other sections untouched."""
    section = render(name, body, when or stamp())
    text = path.read_text(encoding="utf-8") if path.exists() else "# Benchmarks\n"
    path.write_text(replace_section(text, name, section), encoding="utf-8")
    print(f"published section {name!r} to {path}", flush=True)
    return path


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A markdown table (cells rendered with str; `|` inside a cell escaped)."""

    def cells(values: Sequence[object]) -> str:
        return "| " + " | ".join(str(v).replace("|", "\\|") for v in values) + " |"

    return "\n".join([cells(headers), "|" + "---|" * len(headers), *(cells(r) for r in rows)])
