"""Payload encryption for Temporal: workflow history is one more copy of data, so it holds only ciphertext.

Every payload the client or worker sends is serialized and sealed with AES-256-GCM under the
current key; the payload's metadata names the key by id (first 8 hex of its sha256), so keys can
rotate: new payloads use the new key, and old keys stay available for decoding history written
before. Payloads that are not encrypted (history written before the codec existed) decode untouched.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.converter import PayloadCodec

from memwarden import randomness

ENCODING = b"binary/encrypted"
KEY_ID_METADATA = "encryption-key-id"
NONCE_BYTES = 12


class CodecError(ValueError):
    """A payload could not be decrypted: unknown key id, wrong key or tampered bytes (no payload data in it)."""


def key_id(key: bytes) -> str:
    """The id written next to each ciphertext: first 8 hex of sha256(key), never the key itself."""
    return hashlib.sha256(key).hexdigest()[:8]


def _check_key(key: bytes) -> None:
    if len(key) != 32:
        raise ValueError("AES-256-GCM needs a 32-byte key")


class AesGcmCodec(PayloadCodec):
    """Encrypts with `key`; decrypts with `key` or any of `old_keys` (id -> key, ids as `key_id` computes them)."""

    def __init__(self, key: bytes, old_keys: Mapping[str, bytes] | None = None) -> None:
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

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self._encrypt(p) for p in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self._decrypt(p) for p in payloads]

    def _encrypt(self, payload: Payload) -> Payload:
        nonce = randomness.token_bytes(NONCE_BYTES)
        kid = self.key_id.encode()
        sealed = self._current.encrypt(nonce, payload.SerializeToString(), kid)
        return Payload(metadata={"encoding": ENCODING, KEY_ID_METADATA: kid}, data=nonce + sealed)

    def _decrypt(self, payload: Payload) -> Payload:
        if payload.metadata.get("encoding") != ENCODING:
            return payload
        kid = payload.metadata.get(KEY_ID_METADATA, b"").decode("ascii", errors="replace")
        aead = self._keys.get(kid)
        if aead is None:
            raise CodecError(f"no decryption key for key id {kid!r}")
        data = payload.data
        if len(data) <= NONCE_BYTES:
            raise CodecError(f"encrypted payload too short (key id {kid!r})")
        try:
            plain = aead.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], kid.encode())
        except InvalidTag:
            raise CodecError(f"payload failed authentication (key id {kid!r})") from None
        decoded = Payload()
        decoded.ParseFromString(plain)
        return decoded
