"""Fixtures for the API tests: one embedded stack per test module that asks for `api` (module scope)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.integration.api_stack import Api, embedded_api


@pytest.fixture(scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Api]:
    async with embedded_api(tmp_path_factory.mktemp("api")) as stack:
        yield stack


@pytest.fixture
async def http(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=api.base_url, timeout=60) as client:
        yield client
