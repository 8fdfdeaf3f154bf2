"""`/mcp`: memwarden's MCP server over streamable HTTP, on the API, when the `mcp` extra is installed.

Why here and this thin: the tools are memwarden.integrations.mcp, each one call to this same API
under the caller's token; this module only routes two paths of the API to the SDK's own Starlette
app: `/mcp` itself, behind the SDK's bearer middleware with memwarden's token verifier (a request
without a valid token is the SDK's `401` with `WWW-Authenticate: Bearer ..., resource_metadata=...`),
and the OAuth protected-resource metadata (RFC 9728) the SDK serves at
`/.well-known/oauth-protected-resource/<path>`, naming the resource and its authorization server.

Stateless: every POST is answered on its own (JSON, no session id, no stream), so any API replica
answers any request and nothing is held between calls. DNS-rebinding checks are off because a
bearer token, never a cookie, authenticates `/mcp`: a rebound browser page has none to send.

This module imports the SDK only inside `mount`, so the API runs without the extra; with
`MEMWARDEN_MCP_ENABLED` on and the extra missing, `mount` fails naming the extra.
"""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from fastapi import FastAPI
from starlette.routing import Route

from memwarden.config import Settings

MCP_PATH = "/mcp"
EXTRA_MISSING = (
    "MEMWARDEN_MCP_ENABLED is on but the mcp extra is not installed: pip install 'memwarden[mcp]' "
    "(or turn MEMWARDEN_MCP_ENABLED off)"
)


class McpUnavailable(RuntimeError):
    """`/mcp` was asked for and the `mcp` extra is not installed."""


def extra_installed() -> bool:
    return importlib.util.find_spec("mcp") is not None


def wanted(settings: Settings) -> bool:
    """Serve `/mcp`: as configured, or (unset) when the extra is installed."""
    if settings.mcp_enabled is None:
        return extra_installed()
    return settings.mcp_enabled


@dataclass
class McpMount:
    """What `create_app`'s lifespan runs: the SDK's session manager (its task group)."""

    sdk_app: Any

    def running(self) -> AbstractAsyncContextManager[None]:
        manager = self.sdk_app.state.mcp_session_manager

        @asynccontextmanager
        async def run() -> AsyncIterator[None]:
            async with manager.run():
                yield

        return run()


def mount(app: FastAPI, settings: Settings) -> McpMount:
    """Route `/mcp` and its protected-resource metadata to the SDK's app; McpUnavailable without the extra."""
    try:
        from mcp.server.auth.settings import AuthSettings
        from mcp.server.transport_security import TransportSecuritySettings

        from memwarden.integrations.mcp import http_server
        from memwarden.integrations.mcp_auth import MemwardenTokenVerifier
    except ImportError as exc:
        raise McpUnavailable(EXTRA_MISSING) from exc

    resource = settings.mcp_resource
    auth = AuthSettings(
        issuer_url=settings.mcp_authorization_server_url,  # type: ignore[arg-type]
        resource_server_url=resource,  # type: ignore[arg-type]
        validate_token_resource=False,  # the verifier checks `aud` itself (MEMWARDEN_AUTH_AUDIENCE)
    )
    server = http_server(
        app, token_verifier=MemwardenTokenVerifier(settings.token_verifier, resource=resource), auth=auth
    )
    sdk_app = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        max_request_body_size=settings.max_request_bytes,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    sdk_app.state.mcp_session_manager = server.session_manager
    metadata_path = "/.well-known/oauth-protected-resource" + (urlparse(resource).path.rstrip("/"))
    for path in (MCP_PATH, metadata_path):
        app.router.routes.append(Route(path, endpoint=sdk_app, include_in_schema=False))
    return McpMount(sdk_app)
