"""The documentation stands on its own: links resolve inside the repository, nothing points outside it,
and every decision record is in the index."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted([ROOT / "README.md", ROOT / "deploy" / "README.md", *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = FENCE.sub("", path.read_text(encoding="utf-8"))
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def _links(path: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", path.read_text(encoding="utf-8")))


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve_inside_the_repository(doc: Path) -> None:
    for target in _links(doc):
        if re.match(r"^[a-z]+:", target):  # http(s), mailto: not checked here
            continue
        file, _, anchor = target.partition("#")
        resolved = (doc.parent / file).resolve() if file else doc
        assert resolved.is_relative_to(ROOT), f"{doc.name} links outside the repository: {target}"
        assert resolved.exists(), f"{doc.relative_to(ROOT)} links to {target}, which does not exist"
        if anchor and resolved.suffix == ".md":
            assert anchor in _anchors(resolved), f"{doc.relative_to(ROOT)}: no heading for #{anchor} in {file}"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_points_at_a_design_outside_the_repository(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    for outside in ("../shared", "ARCHITECTURE.md"):
        assert outside not in text, f"{doc.relative_to(ROOT)} mentions {outside}"


def test_every_decision_record_is_in_the_index() -> None:
    folder = ROOT / "docs" / "decisions"
    listed = {link for link in _links(folder / "README.md") if not re.match(r"^[a-z]+:", link)}
    records = {p.name for p in folder.glob("*.md") if p.name != "README.md"}
    assert records, "no decision records"
    assert records <= listed, f"not in docs/decisions/README.md: {sorted(records - listed)}"


def test_readme_stays_short() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; what is not for a new user belongs in docs/"
