"""`POST /codec/decode`: the Temporal UI's codec-server protocol, for a tenant's operators.

Workflow history holds only ciphertext (memwarden/temporal/codec.py). An operator who must read a
history as audit evidence points the Temporal Web UI (or `temporal workflow show --codec-endpoint`)
at this endpoint; it decrypts with the same `AesGcmCodec` the worker uses. The protocol: a JSON body
`{"payloads": [{"metadata": {"encoding": "<base64>"}, "data": "<base64>"}]}` (the protobuf JSON of
`temporal.api.common.v1.Payloads`), answered in the same shape.

Tenant-bound: every payload is sealed bound to its tenant and workflow; only those of the caller's
tenant are decrypted, the others (another tenant's, or a tenant the codec could not tell) come back
as they were, still ciphertext. Each decode is audited in that tenant, per workflow, with the
workflow id, its run id (the caller's `run_id` query parameter, else the latest run Temporal
reports) and counts, never payloads.

There is no `/encode`: the UI reads history without it, and a way to seal arbitrary payloads would
let an operator forge inputs (a `settle` update for a pending write) the workers would accept.

Who: the `operator` role only, by bearer token in the `Authorization` header (the CLI's
`--codec-auth`, or the UI's "pass access token"); a token in the path, `/codec/t/<token>/decode`,
for a browser UI that cannot add headers, is used only when no header is sent (a header wins), and
never appears in a problem. The browser calls from the UI's origin, so CORS is allowed for
`codec_cors_origins` on `/codec/` only.
"""

from __future__ import annotations

import base64
import binascii
from collections import Counter
from typing import Annotated, Any

from fastapi import APIRouter, Body, Header, Query, Request
from google.protobuf import json_format
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.service import RPCError

from api.problems import Problem
from api.state import State, get_principal
from memwarden.identity import AuthError, Principal, Role
from memwarden.stores.audit import AuditEventIn
from memwarden.temporal.codec import ENCODING, AesGcmCodec, CodecError, binding, key_id

router = APIRouter(prefix="/codec", tags=["codec"])

MAX_PAYLOADS = 256
_UNAUTHORIZED = {"WWW-Authenticate": "Bearer"}


def _operator(request: Request, state: State, path_token: str | None) -> Principal:
    """The operator a request authenticates: its Authorization header when it sends one, else the path token."""
    if path_token is not None and not request.headers.get("authorization"):
        try:
            principal = state.settings.token_verifier.verify(path_token)
        except AuthError:
            raise Problem(
                401, "invalid_token", "the token is invalid or expired", field="token", headers=_UNAUTHORIZED
            ) from None
    else:
        principal = get_principal(request, state)
    if principal.role is not Role.OPERATOR:
        raise Problem(403, "forbidden_role", f"role {principal.role.value} may not decode workflow payloads")
    return principal


def _is_b64(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _strict_base64(item: dict[str, Any]) -> bool:
    """protobuf's JSON parser forgives bad base64 (it decodes '%%%' to nothing); the protocol does not."""
    metadata = item.get("metadata", {})
    if "data" in item and not _is_b64(item["data"]):
        return False
    return isinstance(metadata, dict) and all(_is_b64(v) for v in metadata.values())


def _parse(body: Any) -> Payloads:
    if not isinstance(body, dict) or not isinstance(body.get("payloads"), list):
        raise Problem(422, "validation_failed", 'body must be {"payloads": [...]}', field="payloads")
    if len(body["payloads"]) > MAX_PAYLOADS:
        raise Problem(422, "validation_failed", f"at most {MAX_PAYLOADS} payloads per request", field="payloads")
    for item in body["payloads"]:
        if not isinstance(item, dict) or not _strict_base64(item):
            raise Problem(422, "validation_failed", "payload data and metadata must be base64", field="payloads")
    try:
        return json_format.ParseDict(body, Payloads(), ignore_unknown_fields=False)
    except json_format.ParseError:
        raise Problem(422, "validation_failed", "payloads are not Temporal Payloads JSON", field="payloads") from None


_CODECS: dict[bytes, AesGcmCodec] = {}


def _codec(state: State) -> AesGcmCodec:
    """The worker's codec: the current key, and the retired ones so history from before a rotation decodes."""
    settings = state.settings
    key = settings.codec_key_bytes
    old = settings.codec_old_key_bytes
    cache_key = key + b"".join(old)
    if cache_key not in _CODECS:
        _CODECS[cache_key] = AesGcmCodec(key, {key_id(k): k for k in old})
    return _CODECS[cache_key]


async def _run_id(state: State, workflow_id: str, asked: str | None) -> str | None:
    if asked is not None or not workflow_id:
        return asked
    try:
        return (await state.temporal.get_workflow_handle(workflow_id).describe()).run_id
    except RPCError:
        return None


async def _decode(
    state: State, principal: Principal, body: Any, namespace: str | None, run_id: str | None
) -> dict[str, Any]:
    payloads = list(_parse(body).payloads)
    codec = _codec(state)
    out: list[Payload] = []
    decoded: Counter[str] = Counter()
    refused = 0
    for payload in payloads:
        bound = binding(payload)
        if payload.metadata.get("encoding") != ENCODING:
            out.append(payload)  # nothing sealed: nothing to open
            continue
        try:
            [plain] = await codec.decode([payload])  # a payload that does not open is a 422, whoever's it is
        except CodecError as exc:
            raise Problem(422, "undecodable_payload", str(exc), field="payloads") from None
        if bound is None or not bound[0] or bound[0] != codec.tenant_tag(principal.tenant):
            refused += 1  # another tenant's, or one no tenant may read: returned as it came
            out.append(payload)
            continue
        decoded[bound[1]] += 1
        out.append(plain)
    for workflow_id, count in sorted(decoded.items()):
        await state.store.append_audit(
            AuditEventIn(
                tenant_id=principal.tenant,
                actor=principal.actor,
                operation="codec_decode",
                reason="operator_read_history",
                workflow_id=workflow_id or None,
                details={
                    "payloads": count,
                    "refused": refused,
                    "run_id": await _run_id(state, workflow_id, run_id),
                    "temporal_namespace": namespace,
                },
            )
        )
    if refused and not decoded:
        await state.store.append_audit(
            AuditEventIn(
                tenant_id=principal.tenant,
                actor=principal.actor,
                operation="codec_decode",
                reason="other_tenant_refused",
                details={"payloads": 0, "refused": refused, "temporal_namespace": namespace},
            )
        )
    return json_format.MessageToDict(Payloads(payloads=out))


_RUN_ID = Query(max_length=64, description="The run whose history this is (audited with it).")


@router.post("/decode")
async def decode(
    request: Request,
    state: State,
    body: Annotated[Any, Body()],
    x_namespace: Annotated[str | None, Header(max_length=256)] = None,
    run_id: Annotated[str | None, _RUN_ID] = None,
) -> dict[str, Any]:
    principal = _operator(request, state, None)
    return await _decode(state, principal, body, x_namespace, run_id)


@router.post("/t/{token}/decode", include_in_schema=False)
async def decode_with_path_token(
    token: str,
    request: Request,
    state: State,
    body: Annotated[Any, Body()],
    x_namespace: Annotated[str | None, Header(max_length=256)] = None,
    run_id: Annotated[str | None, _RUN_ID] = None,
) -> dict[str, Any]:
    principal = _operator(request, state, token)
    return await _decode(state, principal, body, x_namespace, run_id)


class CodecCORSMiddleware:
    """CORS for `/codec/` only (the Temporal UI calls from its own origin); other routes stay same-origin."""

    def __init__(self, app: ASGIApp, origins: list[str]) -> None:
        self.app = app
        self.cors = CORSMiddleware(
            app,
            allow_origins=origins,
            allow_methods=["POST", "OPTIONS"],
            allow_headers=["Content-Type", "Authorization", "X-Namespace"],
            allow_credentials=True,
            max_age=600,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("path", "").startswith("/codec/"):
            await self.cors(scope, receive, send)
        else:
            await self.app(scope, receive, send)
