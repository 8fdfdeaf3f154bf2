"""An issuer's RS256/ES256 tokens at the API, verified against its JWKS on 127.0.0.1, rotated by kid.

The embedded stack (dev server, worker, API under uvicorn) with `MEMWARDEN_AUTH_JWKS_URL` pointing at
a real JWKS endpoint (tests/jwks_server.py) and local tokens switched off, as production runs with an
identity provider: the issuer's tokens work on every route kind (JSON API, /me, the codec endpoint, /mcp),
a rotated key is fetched on first use, and neither a withdrawn key nor a locally minted token works.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from memwarden.identity import mint_token
from tests.integration.api_stack import Api, assert_problem, embedded_api
from tests.integration.mcp_support import MEMORY, mcp_over_http
from tests.jwks_server import ISSUER, JwksServer, issued

RSA_1 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_1 = ec.generate_private_key(ec.SECP256R1())


@pytest.fixture(scope="module")
def idp() -> Iterator[JwksServer]:
    server = JwksServer()
    server.publish(("rsa-1", RSA_1), ("ec-1", EC_1))
    yield server
    server.close()


@pytest.fixture(scope="module")
async def api(tmp_path_factory: pytest.TempPathFactory, idp: JwksServer) -> AsyncIterator[Api]:
    data_dir = Path(tmp_path_factory.mktemp("jwks-api"))
    async with embedded_api(
        data_dir,
        auth_jwks_url=idp.url,
        auth_jwks_issuer=ISSUER,
        auth_local_tokens=False,
        auth_jwks_refetch_seconds=0,  # each test's rotation is seconds after the last fetch
    ) as stack:
        yield stack


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_issuer_tokens_are_accepted_and_local_ones_are_not(api: Api, http: httpx.AsyncClient) -> None:
    for token in (issued(RSA_1, "rsa-1", "RS256"), issued(EC_1, "ec-1", "ES256")):
        answer = await http.get("/v1/settings", headers=bearer(token))
        assert answer.status_code == 200, answer.text
    local = mint_token(api.settings.auth_secret_value, tenant="acme", sub="alice", role="user")
    assert_problem(await http.get("/v1/settings", headers=bearer(local)), 401, code="invalid_token")
    # The /me page and the codec endpoint verify the same way.
    page = await http.get("/me", headers=bearer(issued(RSA_1, "rsa-1", "RS256")))
    assert page.status_code == 200 and "sign-in" not in str(page.url)
    operator = issued(EC_1, "ec-1", "ES256", sub="ops-1", role="operator")
    decoded = await http.post("/codec/decode", headers=bearer(operator), json={"payloads": []})
    assert decoded.status_code == 200, decoded.text
    via_path = await http.post(f"/codec/t/{operator}/decode", json={"payloads": []})
    assert via_path.status_code == 200, via_path.text


async def test_mcp_accepts_the_issuers_tokens_and_names_it_as_the_authorization_server(
    api: Api, http: httpx.AsyncClient
) -> None:
    token = issued(EC_1, "ec-1", "ES256", tenant="acme-mcp")
    async with mcp_over_http(api.base_url, token) as client:  # the SDK's client on /mcp, as the API checks it
        added = await client.call_tool("remember", MEMORY)
        assert not added.is_error and (added.structured_content or {}).get("decision") == "ADD", added.content
        listed = await client.call_tool("list_memories", {})
        assert [m["content"] for m in (listed.structured_content or {})["items"]] == [MEMORY["content"]]
    local = mint_token(api.settings.auth_secret_value, tenant="acme-mcp", sub="alice", role="user")
    refused = await http.post("/mcp", headers=bearer(local), json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert refused.status_code == 401 and "resource_metadata=" in refused.headers["www-authenticate"]
    metadata = (await http.get("/.well-known/oauth-protected-resource/mcp")).json()
    assert metadata["authorization_servers"] == [ISSUER]


async def test_a_rotated_key_is_fetched_on_first_use_and_a_withdrawn_one_stops(
    api: Api, http: httpx.AsyncClient, idp: JwksServer
) -> None:
    rsa_2 = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    before = idp.fetches
    idp.publish(("rsa-2", rsa_2), ("ec-1", EC_1))
    answer = await http.get("/v1/settings", headers=bearer(issued(rsa_2, "rsa-2", "RS256")))
    assert answer.status_code == 200, answer.text
    assert idp.fetches == before + 1
    withdrawn = await http.get("/v1/settings", headers=bearer(issued(RSA_1, "rsa-1", "RS256")))
    assert_problem(withdrawn, 401, code="invalid_token")
    forged = await http.get("/v1/settings", headers=bearer(issued(RSA_1, "rsa-2", "RS256")))
    assert_problem(forged, 401, code="invalid_token")
