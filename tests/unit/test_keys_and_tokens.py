"""Keys that cannot be guessed, one per purpose; tokens with an audience, a bounded lifetime and a leeway;
an issuer's RS256/ES256 tokens verified against its JWKS, served by a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import base64
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from pydantic import ValidationError

from memwarden.config import Settings
from memwarden.forget import subject_key
from memwarden.identity import AuthError, mint_token, token_key, verify_token
from memwarden.jwks import JwksKeys, TokenVerifier
from memwarden.keys import Purpose, derive_key, weak_secret_reason
from tests.jwks_server import JwksServer, issued

STRONG = secrets.token_urlsafe(48)


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def production(**values: Any) -> Settings:
    base: dict[str, Any] = {
        "profile": "production",
        "database_url": "postgresql+asyncpg://db/memwarden",
        "auth_secret": STRONG,
        "codec_key": _b64(os.urandom(32)),
        "audit_signing_key": _b64(os.urandom(32)),
        "qdrant_url": "http://qdrant:6333",
    }
    return Settings(**(base | values))


# -- secrets and derived keys -------------------------------------------------------------------


@pytest.mark.parametrize(
    "secret",
    [
        "change-me-auth-secret",  # deploy/env/memwarden.env.example's placeholder
        "CHANGE-ME-but-long-enough-to-pass-any-length-check-0123456789",
        "s" * 48,
        "abab" * 20,
        secrets.token_hex(16),  # 16 random bytes
        secrets.token_urlsafe(24),
        "correct horse battery staple, a passphrase",
    ],
)
def test_production_refuses_a_weak_or_placeholder_secret(secret: str) -> None:
    assert weak_secret_reason(secret) is not None
    with pytest.raises(ValidationError, match="MEMWARDEN_AUTH_SECRET"):
        production(auth_secret=secret)


@pytest.mark.parametrize(
    "secret", [secrets.token_urlsafe(32), _b64(os.urandom(32)), secrets.token_hex(32), secrets.token_urlsafe(48)]
)
def test_production_accepts_32_random_bytes(secret: str) -> None:
    assert weak_secret_reason(secret) is None
    assert production(auth_secret=secret).auth_secret == secret


def test_the_example_env_files_placeholder_is_refused() -> None:
    example = Path(__file__).parents[2] / "deploy" / "env" / "memwarden.env.example"
    [line] = [x for x in example.read_text().splitlines() if x.startswith("MEMWARDEN_AUTH_SECRET=")]
    assert weak_secret_reason(line.split("=", 1)[1]) is not None


def test_one_independent_key_per_purpose() -> None:
    keys = {p: derive_key(STRONG, p) for p in Purpose}
    assert len(set(keys.values())) == len(Purpose) and all(len(k) == 32 for k in keys.values())
    assert STRONG.encode() not in keys.values()
    assert derive_key(STRONG, Purpose.CSRF) == derive_key(STRONG, Purpose.CSRF)  # stable across restarts
    assert derive_key(secrets.token_urlsafe(48), Purpose.CSRF) != keys[Purpose.CSRF]
    assert subject_key(STRONG) == keys[Purpose.PSEUDONYMS]
    assert token_key(STRONG) == keys[Purpose.TOKENS]
    settings = production()
    assert settings.key_for(Purpose.SUBJECT_HANDLES) == keys[Purpose.SUBJECT_HANDLES]
    # A local token is not signed with the secret itself: the secret alone does not verify it.
    token = mint_token(STRONG, tenant="t1", sub="alice", role="user")
    with pytest.raises(jwt.InvalidSignatureError):
        jwt.decode(token, STRONG, algorithms=["HS256"], audience="memwarden")


# -- audience, lifetime, leeway ----------------------------------------------------------------


def _raw(claims: dict[str, Any], secret: str = STRONG) -> str:
    return jwt.encode(claims, token_key(secret), algorithm="HS256")


def test_tokens_carry_and_require_an_audience() -> None:
    token = mint_token(STRONG, tenant="t1", sub="alice", role="user")
    assert jwt.decode(token, options={"verify_signature": False})["aud"] == "memwarden"
    assert verify_token(token, STRONG).sub == "alice"
    with pytest.raises(AuthError):
        verify_token(token, STRONG, audience="another-service")
    now = int(time.time())
    claims = {"iss": "memwarden", "tenant": "t1", "sub": "alice", "role": "user", "iat": now, "exp": now + 60}
    with pytest.raises(AuthError, match="MissingRequiredClaim"):
        verify_token(_raw(claims), STRONG)
    with pytest.raises(AuthError):
        verify_token(_raw(claims | {"aud": "billing"}), STRONG)
    assert verify_token(_raw(claims | {"aud": "memwarden"}), STRONG).sub == "alice"


def test_a_token_lives_at_most_the_configured_maximum() -> None:
    with pytest.raises(ValueError, match="at most 3600 seconds"):
        mint_token(STRONG, tenant="t1", sub="alice", role="user", ttl_seconds=3601, max_ttl_seconds=3600)
    now = int(time.time())
    base = {"iss": "memwarden", "aud": "memwarden", "tenant": "t1", "sub": "alice", "role": "user", "iat": now}
    long_lived = _raw(base | {"exp": now + 365 * 86400})
    with pytest.raises(AuthError, match="lifetime"):
        verify_token(long_lived, STRONG)
    assert verify_token(_raw(base | {"exp": now + 3600}), STRONG, max_ttl_seconds=3600).sub == "alice"
    with pytest.raises(AuthError, match="lifetime"):
        verify_token(_raw(base | {"exp": now + 3601}), STRONG, max_ttl_seconds=3600)
    with pytest.raises(ValidationError, match="TOKEN_TTL_SECONDS"):
        Settings(token_ttl_seconds=7200, token_max_ttl_seconds=3600)


def test_a_small_clock_leeway() -> None:
    just_expired = mint_token(STRONG, tenant="t1", sub="a", role="user", ttl_seconds=60, now=time.time() - 70)
    assert verify_token(just_expired, STRONG, leeway_seconds=30).sub == "a"
    with pytest.raises(AuthError, match="ExpiredSignature"):
        verify_token(just_expired, STRONG, leeway_seconds=5)
    long_expired = mint_token(STRONG, tenant="t1", sub="a", role="user", ttl_seconds=60, now=time.time() - 3600)
    with pytest.raises(AuthError, match="ExpiredSignature"):
        verify_token(long_expired, STRONG)


def test_the_token_command_refuses_more_than_the_maximum(tmp_path: Path) -> None:
    env = os.environ | {"MEMWARDEN_DATA_DIR": str(tmp_path), "MEMWARDEN_TOKEN_MAX_TTL_SECONDS": "3600"}
    command = [sys.executable, "-m", "stack.cli", "token", "--tenant", "t1", "--sub", "alice", "--role", "user"]
    refused = subprocess.run([*command, "--ttl", "7200"], env=env, capture_output=True, text=True, check=False)
    assert refused.returncode == 2 and "at most 3600 seconds" in refused.stderr and refused.stdout == ""
    minted = subprocess.run([*command, "--ttl", "600"], env=env, capture_output=True, text=True, check=True)
    claims = jwt.decode(minted.stdout.strip(), options={"verify_signature": False})
    assert claims["exp"] - claims["iat"] == 600 and claims["aud"] == "memwarden"


# -- an issuer's JWKS --------------------------------------------------------------------------


@pytest.fixture
def issuer() -> Iterator[JwksServer]:
    server = JwksServer()
    yield server
    server.close()


def _verifier(url: str, **fields: Any) -> TokenVerifier:
    values: dict[str, Any] = {
        "secret": STRONG,
        "issuer": "memwarden",
        "audience": "memwarden",
        "max_ttl_seconds": 3600,
        "leeway_seconds": 30,
        "jwks": JwksKeys(url, refetch_interval=0.0),
        "accept_local": False,
        "jwks_issuer": "https://idp.example",
    }
    return TokenVerifier(**(values | fields))


async def test_rs256_and_es256_tokens_verify_against_the_jwks_and_rotate_by_kid(issuer: JwksServer) -> None:
    rsa_1 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_1 = ec.generate_private_key(ec.SECP256R1())
    issuer.publish(("rsa-1", rsa_1), ("ec-1", ec_1))
    verifier = _verifier(issuer.url)
    with pytest.raises(AuthError, match="unknown kid"):
        verifier.verify(issued(rsa_1, "rsa-1", "RS256"))  # nothing fetched yet: verification never fetches
    assert issuer.fetches == 0
    for token in (issued(rsa_1, "rsa-1", "RS256"), issued(ec_1, "ec-1", "ES256")):
        await verifier.prefetch(token)
        principal = verifier.verify(token)
        assert (principal.tenant, principal.sub, principal.role.value) == ("acme", "alice", "user")
    assert issuer.fetches == 1  # the second key was already in the set

    # Rotation: the issuer publishes rsa-2 and withdraws rsa-1; a token naming rsa-2 refetches the set.
    rsa_2 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    issuer.publish(("rsa-2", rsa_2), ("ec-1", ec_1))
    rotated = issued(rsa_2, "rsa-2", "RS256")
    await verifier.prefetch(rotated)
    assert verifier.verify(rotated).sub == "alice" and issuer.fetches == 2
    with pytest.raises(AuthError, match="unknown kid"):
        verifier.verify(issued(rsa_1, "rsa-1", "RS256"))  # withdrawn with the refetch


async def test_issuer_tokens_that_must_not_verify(issuer: JwksServer) -> None:
    good_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    issuer.publish(("rsa-1", good_key), ("ec-1", ec_key))
    verifier = _verifier(issuer.url)
    await verifier.prefetch(issued(good_key, "rsa-1", "RS256"))
    now = int(time.time())
    bad = {
        "forged_with_another_key": issued(stranger, "rsa-1", "RS256"),
        "other_audience": issued(good_key, "rsa-1", "RS256", aud="billing"),
        "other_issuer": issued(good_key, "rsa-1", "RS256", iss="https://evil.example"),
        "too_long_lived": issued(good_key, "rsa-1", "RS256", exp=now + 86400),
        "expired": issued(good_key, "rsa-1", "RS256", iat=now - 7200, exp=now - 3600),
        "rsa_key_named_by_an_es256_token": issued(ec_key, "rsa-1", "ES256"),
        "local_hs256_when_not_accepted": mint_token(STRONG, tenant="acme", sub="alice", role="user"),
        "hs256_signed_with_the_public_key": jwt.encode(
            {"iss": "https://idp.example", "aud": "memwarden", "sub": "x", "iat": now, "exp": now + 60},
            b"not-the-key-0123456789abcdef0123456789",
            algorithm="HS256",
            headers={"kid": "rsa-1"},
        ),
    }
    for name, token in bad.items():
        await verifier.prefetch(token)
        with pytest.raises(AuthError):
            verifier.verify(token)
            pytest.fail(name)
    # With local tokens accepted too (the embedded profile, or production that opts in), both verify.
    both = _verifier(issuer.url, accept_local=True)
    await both.prefetch(issued(good_key, "rsa-1", "RS256"))
    assert both.verify(bad["local_hs256_when_not_accepted"]).sub == "alice"
    assert both.verify(issued(good_key, "rsa-1", "RS256")).sub == "alice"


def test_production_with_a_jwks_takes_no_local_tokens_unless_asked() -> None:
    assert production().auth_local_tokens is True
    assert production(auth_jwks_url="https://idp.example/jwks").auth_local_tokens is False
    assert production(auth_jwks_url="https://idp.example/jwks", auth_local_tokens=True).auth_local_tokens is True
    assert Settings(auth_jwks_url="https://idp.example/jwks").auth_local_tokens is True  # embedded keeps its secret
