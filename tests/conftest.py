"""Shared fixtures: service URLs (required in CI, skipped locally when absent)."""

from __future__ import annotations

import os

import pytest

REQUIRE_SERVICES = os.environ.get("MEMWARDEN_TEST_REQUIRE_SERVICES") == "1"


def service_url(var: str) -> str:
    """The URL of an external test service, or skip; in CI (REQUIRE_SERVICES) a missing one fails."""
    url = os.environ.get(var)
    if not url:
        if REQUIRE_SERVICES:
            pytest.fail(f"{var} is required in CI but not set")
        pytest.skip(f"{var} not set")
    return url


@pytest.fixture(scope="session")
def postgres_url() -> str:
    return service_url("MEMWARDEN_TEST_POSTGRES_URL")


@pytest.fixture(scope="session")
def redis_url() -> str:
    return service_url("MEMWARDEN_TEST_REDIS_URL")
