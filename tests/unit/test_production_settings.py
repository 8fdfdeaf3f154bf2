"""The settings the deployment needs: codec key rotation from the environment, TLS to Temporal,
the Redis key namespace, and what the production profile refuses."""

from __future__ import annotations

import base64
import os
import secrets
from pathlib import Path

import pytest
from pydantic import ValidationError
from temporalio.service import TLSConfig

from memwarden.config import SECRET_FIELDS, Settings
from memwarden.stores.cache import RedisCache, open_cache
from memwarden.temporal.client import tls_config
from memwarden.temporal.codec import CodecError
from memwarden.temporal.converter import data_converter


def _b64(key: bytes) -> str:
    return base64.b64encode(key).decode()


def _settings(**values: object) -> Settings:
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture(autouse=True)
def _no_memwarden_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith("MEMWARDEN_"):
            monkeypatch.delenv(key)


async def test_rotation_through_settings_keeps_old_history_readable() -> None:
    old, new = os.urandom(32), os.urandom(32)
    before = data_converter(_settings(codec_key=_b64(old)))
    sealed = await before.encode(["history written before the rotation"])

    rotated = data_converter(_settings(codec_key=_b64(new), codec_old_keys=[_b64(old)]))
    assert await rotated.decode(sealed, [str]) == ["history written before the rotation"]
    fresh = await rotated.encode(["after"])
    assert fresh[0].metadata["encryption-key-id"] != sealed[0].metadata["encryption-key-id"]

    forgot = data_converter(_settings(codec_key=_b64(new)))
    with pytest.raises(CodecError):
        await forgot.decode(sealed, [str])


def test_old_keys_come_from_the_environment_as_json(monkeypatch: pytest.MonkeyPatch) -> None:
    old = os.urandom(32)
    monkeypatch.setenv("MEMWARDEN_CODEC_KEY", _b64(os.urandom(32)))
    monkeypatch.setenv("MEMWARDEN_CODEC_OLD_KEYS", f'["{_b64(old)}"]')
    assert Settings().codec_old_key_bytes == [old]


def test_bad_old_keys_are_refused() -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        _ = _settings(codec_key=_b64(os.urandom(32)), codec_old_keys=[_b64(b"short")]).codec_old_key_bytes
    with pytest.raises(ValueError, match="base64"):
        _ = _settings(codec_key=_b64(os.urandom(32)), codec_old_keys=["not base64!"]).codec_old_key_bytes


def test_tls_config_is_off_by_default_and_system_cas_when_asked() -> None:
    assert tls_config(_settings()) is False
    assert tls_config(_settings(temporal_tls=True)) is True


def test_tls_config_reads_the_ca_and_the_client_pair(tmp_path: Path) -> None:
    (tmp_path / "ca.crt").write_bytes(b"CA PEM")
    (tmp_path / "tls.crt").write_bytes(b"CERT PEM")
    (tmp_path / "tls.key").write_bytes(b"KEY PEM")
    tls = tls_config(
        _settings(
            temporal_tls=True,
            temporal_tls_ca_file=tmp_path / "ca.crt",
            temporal_tls_cert_file=tmp_path / "tls.crt",
            temporal_tls_key_file=tmp_path / "tls.key",
            temporal_tls_server_name="frontend.temporal.internal",
        )
    )
    assert isinstance(tls, TLSConfig)
    assert (tls.server_root_ca_cert, tls.client_cert, tls.client_private_key) == (b"CA PEM", b"CERT PEM", b"KEY PEM")
    assert tls.domain == "frontend.temporal.internal"


def test_a_client_certificate_needs_its_key(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_bytes(b"CERT PEM")
    with pytest.raises(ValueError, match="go together"):
        tls_config(_settings(temporal_tls=True, temporal_tls_cert_file=tmp_path / "tls.crt"))


def test_missing_tls_file_fails_at_connect_time(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        tls_config(_settings(temporal_tls=True, temporal_tls_ca_file=tmp_path / "absent.crt"))


async def test_redis_namespace_reaches_the_cache() -> None:
    cache = open_cache(_settings(cache_backend="redis", redis_namespace="tenantfleet"))
    assert isinstance(cache, RedisCache) and cache.namespace == "tenantfleet"
    await cache.close()
    with pytest.raises(ValidationError, match="redis_namespace"):
        _settings(redis_namespace="has:colon")
    with pytest.raises(ValidationError, match="redis_namespace"):
        _settings(redis_namespace="")


def test_secret_fields_are_settings() -> None:
    assert set(SECRET_FIELDS) <= set(Settings.model_fields)


@pytest.mark.parametrize("missing", ["database_url", "auth_secret", "codec_key", "audit_signing_key"])
def test_production_refuses_to_start_without_a_required_setting(missing: str) -> None:
    values = {
        "profile": "production",
        "database_url": "postgresql+asyncpg://db/memwarden",
        "auth_secret": secrets.token_urlsafe(48),
        "codec_key": _b64(os.urandom(32)),
        "audit_signing_key": _b64(os.urandom(32)),
        "qdrant_url": "http://qdrant:6333",
    }
    _settings(**values)
    del values[missing]
    with pytest.raises(ValidationError, match=f"MEMWARDEN_{missing.upper()} is required"):
        _settings(**values)
