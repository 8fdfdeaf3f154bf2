"""bench.production_profile starts real processes; what it hands them must be a valid production configuration."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.production_profile import production_env
from memwarden.config import Settings


def test_the_benchs_environment_is_a_valid_production_configuration(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = production_env(
        "postgresql+asyncpg://postgres@127.0.0.1:5432/bench",
        data_dir=tmp_path / "data",
        redis_url="redis://127.0.0.1:6379/15",
        redis_namespace="bench",
        temporal_address="127.0.0.1:7233",
    )
    for name in [n for n in os.environ if n.startswith("MEMWARDEN_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.profile == "production"
    assert settings.database_url.startswith("postgresql+asyncpg://")


def test_each_run_gets_fresh_secrets(tmp_path: Path) -> None:
    def env() -> dict[str, str]:
        return production_env(
            "postgresql+asyncpg://h/b",
            data_dir=tmp_path,
            redis_url="redis://h",
            redis_namespace="n",
            temporal_address="h:1",
        )

    first, second = env(), env()
    for name in ("MEMWARDEN_AUTH_SECRET", "MEMWARDEN_CODEC_KEY", "MEMWARDEN_AUDIT_SIGNING_KEY"):
        assert first[name] != second[name]
