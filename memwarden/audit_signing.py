"""Signed checkpoints of the audit chain head (Ed25519), so a database writer cannot rebuild history.

The hash chain alone proves that stored events agree with each other; someone who can write the
database could still edit an event and recompute every later hash. At intervals the chain head
(its seq, hash and the number of events up to it) is signed with a key the database never holds;
verification checks every checkpoint against the configured public keys, so a rebuilt chain fails
at the first checkpoint after the edit. What a checkpoint says is defined here once, as canonical
JSON, independent of any library's formatting.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable
from datetime import UTC, datetime

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import BaseModel, ConfigDict

CHECKPOINT_VERSION = 1
"""Bumped if the signed message ever changes shape; old checkpoints keep verifying under theirs."""


class Checkpoint(BaseModel):
    """One signed statement: 'the chain had `event_count` events and its head was `head_hash` at `seq`'."""

    model_config = ConfigDict(frozen=True)

    seq: int
    head_hash: str
    event_count: int
    prev_seq: int
    """seq of the previous checkpoint (0 for the first): removing a checkpoint breaks the next one."""
    at: datetime
    key_id: str
    signature: str
    """base64 Ed25519 signature over `checkpoint_message(...)`."""


def key_id(public: Ed25519PublicKey) -> str:
    """First 16 hex of sha256(raw public key): names the key next to each signature."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def checkpoint_message(*, seq: int, head_hash: str, event_count: int, prev_seq: int, at: datetime, kid: str) -> bytes:
    """The exact bytes that are signed: sorted keys, no spaces, UTC time with microseconds."""
    body = {
        "v": CHECKPOINT_VERSION,
        "seq": seq,
        "head_hash": head_hash,
        "event_count": event_count,
        "prev_seq": prev_seq,
        "at": at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "key_id": kid,
    }
    return json.dumps(body, sort_keys=True, separators=(",", ":")).encode("ascii")


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"{what} must be base64") from None


class CheckpointSigner:
    """Holds the private key; signs checkpoints. Built from a base64 32-byte Ed25519 seed."""

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self._key = private_key
        self.public_key = private_key.public_key()
        self.key_id = key_id(self.public_key)

    @classmethod
    def from_base64(cls, seed: str) -> CheckpointSigner:
        raw = _b64decode(seed, "the audit signing key")
        if len(raw) != 32:
            raise ValueError("the audit signing key must be a 32-byte Ed25519 seed, base64-encoded")
        return cls(Ed25519PrivateKey.from_private_bytes(raw))

    @staticmethod
    def generate_base64() -> str:
        """A new seed, for the embedded profile's key file (or an operator's `MEMWARDEN_AUDIT_SIGNING_KEY`)."""
        seed = Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )
        return base64.b64encode(seed).decode("ascii")

    def public_base64(self) -> str:
        raw = self.public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return base64.b64encode(raw).decode("ascii")

    def sign(self, *, seq: int, head_hash: str, event_count: int, prev_seq: int, at: datetime) -> Checkpoint:
        message = checkpoint_message(
            seq=seq, head_hash=head_hash, event_count=event_count, prev_seq=prev_seq, at=at, kid=self.key_id
        )
        signature = base64.b64encode(self._key.sign(message)).decode("ascii")
        return Checkpoint(
            seq=seq,
            head_hash=head_hash,
            event_count=event_count,
            prev_seq=prev_seq,
            at=at,
            key_id=self.key_id,
            signature=signature,
        )


class CheckpointVerifier:
    """Public keys only (by key id): what an auditor needs, and nothing that can sign."""

    def __init__(self, public_keys: Iterable[Ed25519PublicKey]) -> None:
        self._keys = {key_id(k): k for k in public_keys}

    @classmethod
    def from_base64(cls, keys: Iterable[str]) -> CheckpointVerifier:
        decoded = []
        for text in keys:
            raw = _b64decode(text, "an audit verify key")
            if len(raw) != 32:
                raise ValueError("an audit verify key must be a 32-byte Ed25519 public key, base64-encoded")
            decoded.append(Ed25519PublicKey.from_public_bytes(raw))
        return cls(decoded)

    @property
    def key_ids(self) -> frozenset[str]:
        return frozenset(self._keys)

    def check(self, checkpoint: Checkpoint) -> str | None:
        """None when the signature holds; otherwise a reason code (unknown key, bad signature)."""
        key = self._keys.get(checkpoint.key_id)
        if key is None:
            return "checkpoint_unknown_key"
        message = checkpoint_message(
            seq=checkpoint.seq,
            head_hash=checkpoint.head_hash,
            event_count=checkpoint.event_count,
            prev_seq=checkpoint.prev_seq,
            at=checkpoint.at,
            kid=checkpoint.key_id,
        )
        try:
            key.verify(base64.b64decode(checkpoint.signature), message)
        except (InvalidSignature, binascii.Error, ValueError):
            return "checkpoint_signature_invalid"
        return None
