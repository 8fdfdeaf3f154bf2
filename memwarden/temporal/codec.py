"""Payload encryption for Temporal: workflow history is one more copy of data, so it holds only ciphertext.

Every payload the client or worker sends is serialized and sealed with AES-256-GCM under the
current key; the payload's metadata names the key by id (first 8 hex of its sha256), so keys can
rotate: new payloads use the new key, and old keys stay available for decoding history written
before.

Each payload is also bound to its tenant and its workflow: the metadata names both
(`memwarden-tenant`, a keyed tag of the tenant id, so history does not name the tenant; and
`memwarden-workflow-id`) and they are the AEAD's associated data, so neither can be changed without
the payload failing to decrypt. The workflow id comes from Temporal's
serialization context; the tenant from the payload itself (the `tenant_id` every workflow and
activity input carries), else from what this process learned about that workflow from its other
payloads (a result carries no tenant of its own). The operators' codec endpoint decodes only
payloads of the caller's tenant (api/routes/codec.py); a payload whose tenant is unknown is
decodable by no tenant's operator.

A payload that is not encrypted is refused: it decodes to an empty payload of an encoding no
converter reads (`REFUSED_ENCODING`), so the input it carried is rejected (an update) or fails (a
start); otherwise anyone who can reach the Temporal frontend could send a plaintext input or update
(a `settle` for a pending write) that the worker would act on. History written before the codec
existed decodes only with `accept_plaintext` (`MEMWARDEN_CODEC_ACCEPT_PLAINTEXT`, for a one-off
migration).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any, Self

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    ActivitySerializationContext,
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
    WorkflowSerializationContext,
)

ENCODING = b"binary/encrypted"
KEY_ID_METADATA = "encryption-key-id"
FORMAT_METADATA = "encryption-format"
BOUND_FORMAT = b"2"
"""Payloads bound to a tenant and a workflow; payloads without the marker were sealed with the key id alone."""
TENANT_METADATA = "memwarden-tenant"
TAG_CONTEXT = b"memwarden payload tenant tag v1"
WORKFLOW_METADATA = "memwarden-workflow-id"
REFUSED_ENCODING = b"binary/refused-unencrypted"
"""What an unencrypted payload decodes to: no payload converter reads it, so nothing acts on its content."""
NONCE_BYTES = 12
MEMO_SIZE = 10_000
"""Workflows whose tenant one process remembers (the most recent), to bind the payloads that carry none."""


class CodecError(ValueError):
    """A payload could not be decrypted: unknown key id, wrong key or tampered bytes (no payload data in it)."""


def key_id(key: bytes) -> str:
    """The id written next to each ciphertext: first 8 hex of sha256(key), never the key itself."""
    return hashlib.sha256(key).hexdigest()[:8]


def _check_key(key: bytes) -> None:
    if len(key) != 32:
        raise ValueError("AES-256-GCM needs a 32-byte key")


def tenant_in(payload: Payload) -> str | None:
    """The `tenant_id` a JSON payload carries at its top level or one level down (a read filter's), if any."""
    if payload.metadata.get("encoding") != b"json/plain":
        return None
    try:
        value: Any = json.loads(payload.data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(value, dict):
        return None
    found = value.get("tenant_id")
    if isinstance(found, str) and found:
        return found
    for child in value.values():
        if isinstance(child, dict) and isinstance(child.get("tenant_id"), str) and child["tenant_id"]:
            return str(child["tenant_id"])
    return None


class TenantMemo:
    """workflow id -> tenant tag, for the payloads of a workflow that name no tenant themselves (bounded, LRU)."""

    def __init__(self, size: int = MEMO_SIZE) -> None:
        self._size = size
        self._tenants: OrderedDict[str, str] = OrderedDict()

    def get(self, workflow_id: str) -> str | None:
        tenant = self._tenants.get(workflow_id)
        if tenant is not None:
            self._tenants.move_to_end(workflow_id)
        return tenant

    def put(self, workflow_id: str, tenant: str) -> None:
        self._tenants[workflow_id] = tenant
        self._tenants.move_to_end(workflow_id)
        while len(self._tenants) > self._size:
            self._tenants.popitem(last=False)


def _workflow_of(context: SerializationContext | None) -> str:
    if isinstance(context, WorkflowSerializationContext | ActivitySerializationContext):
        return context.workflow_id or ""
    return ""


def _aad(kid: bytes, tenant: str, workflow_id: str) -> bytes:
    return kid + b"\x00" + tenant.encode() + b"\x00" + workflow_id.encode()


def binding(payload: Payload) -> tuple[str, str] | None:
    """(tenant tag, workflow id) an encrypted payload is bound to ("" where unknown); None if it is not bound."""
    if payload.metadata.get("encoding") != ENCODING or payload.metadata.get(FORMAT_METADATA) != BOUND_FORMAT:
        return None
    tenant = payload.metadata.get(TENANT_METADATA, b"").decode("utf-8", errors="replace")
    workflow_id = payload.metadata.get(WORKFLOW_METADATA, b"").decode("utf-8", errors="replace")
    return tenant, workflow_id


class AesGcmCodec(PayloadCodec, WithSerializationContext):
    """Encrypts with `key`; decrypts with `key` or any of `old_keys` (id -> key, ids as `key_id` computes them)."""

    def __init__(
        self,
        key: bytes,
        old_keys: Mapping[str, bytes] | None = None,
        *,
        accept_plaintext: bool = False,
        memo: TenantMemo | None = None,
    ) -> None:
        _check_key(key)
        self.key_id = key_id(key)
        self._current = AESGCM(key)
        self._keys: dict[str, AESGCM] = {}
        for kid, old in (old_keys or {}).items():
            _check_key(old)
            if kid != key_id(old):
                raise ValueError(f"old key id {kid!r} does not match its key (expected {key_id(old)!r})")
            self._keys[kid] = AESGCM(old)
        self._keys[self.key_id] = self._current
        self._tag_key = hmac.new(key, TAG_CONTEXT, hashlib.sha256).digest()
        self.accept_plaintext = accept_plaintext
        self.memo = memo or TenantMemo()
        self._workflow_id = ""

    def tenant_tag(self, tenant: str) -> str:
        """What a payload's metadata names its tenant by: a keyed hash, "" for no tenant."""
        return hmac.new(self._tag_key, tenant.encode(), hashlib.sha256).hexdigest()[:32] if tenant else ""

    def with_context(self, context: SerializationContext) -> Self:
        """This codec bound to one workflow (Temporal's serialization context): same keys, same memo."""
        bound = object.__new__(type(self))
        bound.__dict__.update(self.__dict__)
        bound._workflow_id = _workflow_of(context)
        return bound

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self._encrypt(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self._decrypt(p) for p in payloads]

    def _tag_for(self, payload: Payload) -> str:
        """The payload's tenant tag: from its own `tenant_id`, else what this workflow's payloads said."""
        tenant = tenant_in(payload)
        if tenant is not None:
            tag = self.tenant_tag(tenant)
            if self._workflow_id:
                self.memo.put(self._workflow_id, tag)
            return tag
        return (self.memo.get(self._workflow_id) if self._workflow_id else None) or ""

    def _encrypt(self, payload: Payload) -> Payload:
        tenant = self._tag_for(payload)
        nonce = os.urandom(NONCE_BYTES)
        kid = self.key_id.encode()
        sealed = self._current.encrypt(nonce, payload.SerializeToString(), _aad(kid, tenant, self._workflow_id))
        return Payload(
            metadata={
                "encoding": ENCODING,
                KEY_ID_METADATA: kid,
                FORMAT_METADATA: BOUND_FORMAT,
                TENANT_METADATA: tenant.encode(),
                WORKFLOW_METADATA: self._workflow_id.encode(),
            },
            data=nonce + sealed,
        )

    def _decrypt(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            if self.accept_plaintext:
                return payload
            # Not raised: a codec error fails the whole workflow task (and wedges the workflow). A payload
            # no converter reads fails just the input it carries: an update is rejected, a start fails.
            return Payload(metadata={"encoding": REFUSED_ENCODING})
        kid = payload.metadata.get(KEY_ID_METADATA, b"").decode("ascii", errors="replace")
        aead = self._keys.get(kid)
        if aead is None:
            raise CodecError(f"no decryption key for key id {kid!r}")
        data = payload.data
        if len(data) <= NONCE_BYTES:
            raise CodecError(f"encrypted payload too short (key id {kid!r})")
        bound = binding(payload)
        aad = kid.encode() if bound is None else _aad(kid.encode(), *bound)
        try:
            plain = aead.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], aad)
        except InvalidTag:
            raise CodecError(f"payload failed authentication (key id {kid!r})") from None
        if bound is not None and bound[0] and (bound[1] or self._workflow_id):
            self.memo.put(bound[1] or self._workflow_id, bound[0])
        decoded = Payload()
        decoded.ParseFromString(plain)
        return decoded
