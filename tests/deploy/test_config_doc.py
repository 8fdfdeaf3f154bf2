"""deploy/README.md's configuration reference is generated from memwarden/config.py; this is the CI
check that fails when it is out of date (fix: `python -m memwarden.config_doc --write deploy/README.md`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memwarden import config_doc
from memwarden.config import Settings

README = Path(__file__).resolve().parents[2] / "deploy" / "README.md"


def test_deploy_readme_reference_is_current() -> None:
    text = README.read_text()
    assert config_doc.BEGIN in text and config_doc.END in text
    generated = text[text.index(config_doc.BEGIN) : text.index(config_doc.END) + len(config_doc.END)]
    assert generated == config_doc.reference(), (
        "deploy/README.md is out of date: run .venv/bin/python -m memwarden.config_doc --write deploy/README.md"
    )


def test_every_setting_has_a_row_and_a_description() -> None:
    reference = config_doc.reference()
    for name, info in Settings.model_fields.items():
        assert f"| `MEMWARDEN_{name.upper()}` |" in reference, name
        assert info.description, f"{name} has no description for the reference"


def test_required_settings_are_discovered_from_the_validator() -> None:
    assert config_doc.production_required() == [
        "database_url",
        "auth_secret",
        "codec_key",
        "audit_signing_key",
        "qdrant_url",
    ]


def test_the_reference_does_not_depend_on_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    before = config_doc.reference()
    monkeypatch.setenv("MEMWARDEN_MAX_K", "7")
    monkeypatch.setenv("MEMWARDEN_PROFILE", "production")
    assert config_doc.reference() == before


def test_check_fails_on_a_stale_reference_and_write_fixes_it(tmp_path: Path) -> None:
    stale = tmp_path / "README.md"
    text = README.read_text()
    stale.write_text(text.replace("| `MEMWARDEN_MAX_K` |", "| `MEMWARDEN_MAX_KK` |"))
    assert config_doc.main(["--check", str(stale)]) == 1
    assert config_doc.main(["--write", str(stale)]) == 0
    assert config_doc.main(["--check", str(stale)]) == 0
    assert stale.read_text() == text
