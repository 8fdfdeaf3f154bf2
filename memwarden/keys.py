"""One key per purpose, derived from the service's secret, and the rule for a secret strong enough to derive from.

Why separate keys: a value made under one purpose must be useless under another. A token's signature
must not double as a CSRF token, and the hashes that name people in the audit log and in receipts
must not match the handles that name them in workflow history, or history would link to the audit
log. HKDF-SHA256 (RFC 5869) expands the one configured secret into independent 32-byte keys, one per
`Purpose`; rotating the secret rotates them all.

Why a strength rule: every derived key is only as hard to guess as the secret. The production
profile refuses a secret with fewer than 32 bytes of randomness (estimated from its alphabet and
length, so a long run of one character or a dictionary word fails) and the example file's
placeholders (`change-me...`), which would otherwise go live unnoticed.
"""

from __future__ import annotations

from enum import StrEnum

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

KEY_BYTES = 32
MIN_SECRET_BITS = 256
"""32 random bytes: what `openssl rand -base64 32` (or more) gives."""
PLACEHOLDER_PREFIX = "change-me"
_SALT = b"memwarden key derivation v1"


class Purpose(StrEnum):
    """What a derived key is for; its value is the HKDF `info`, so it never changes once released."""

    TOKENS = "tokens"
    """HS256 signatures of locally minted bearer tokens."""
    PSEUDONYMS = "pseudonyms"
    """Keyed hashes of people in audit events, receipts and deletion records (`memwarden.forget.subject_hash`)."""
    SUBJECT_HANDLES = "subject-handles"
    """The hash in the names of subject handles, which workflow history holds (`memwarden.stores.subjects`)."""
    CSRF = "csrf"
    """The /me page's form tokens (`api.me.session`)."""
    REQUEST_BINDINGS = "request-bindings"
    """What a keyed write the API rejected before parking was proposed with (`api.prescreen`): a reused
    idempotency key is recognised without a content hash of the rejected text on record."""


def derive_key(secret: str | bytes, purpose: Purpose) -> bytes:
    """The 32-byte key for `purpose`: HKDF-SHA256 of the secret, a fixed salt and the purpose as `info`."""
    material = secret.encode("utf-8") if isinstance(secret, str) else secret
    hkdf = HKDF(algorithm=hashes.SHA256(), length=KEY_BYTES, salt=_SALT, info=f"memwarden/{purpose.value}".encode())
    return hkdf.derive(material)


_HEX = frozenset("0123456789abcdefABCDEF")
_BASE64 = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_=")


def secret_bits(secret: str) -> float:
    """A generous estimate of the randomness in `secret`, in bits (0 for one that repeats itself).

    An estimate: it catches short, repetitive and placeholder secrets, not every guessable one.

    Per character: 4 bits for hex, 6 for base64 (either alphabet, padding not counted), 4 for anything
    else (free text such as a passphrase carries far less than its alphabet allows). A secret with
    fewer than 12 distinct characters, or one character making up more than a quarter of it, is not
    random: 0.
    """
    body = secret.rstrip("=")
    chars = set(body)
    if len(chars) < 12 or max(body.count(c) for c in chars) * 4 > len(body):
        return 0.0
    if chars <= _HEX:
        per = 4.0
    elif chars <= _BASE64:
        per = 6.0
    else:
        per = 4.0
    return per * len(body)


def weak_secret_reason(secret: str) -> str | None:
    """Why `secret` may not be used in production, or None when it may."""
    if secret.strip().lower().startswith(PLACEHOLDER_PREFIX):
        return "is the example file's placeholder (change-me...): generate one with `openssl rand -base64 48`"
    if len(secret.encode("utf-8")) < KEY_BYTES or secret_bits(secret) < MIN_SECRET_BITS:
        return "holds fewer than 32 random bytes: generate one with `openssl rand -base64 48`"
    return None
