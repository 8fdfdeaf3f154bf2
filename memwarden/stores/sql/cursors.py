"""Opaque keyset cursors for the store's paginated listings (memories newest first, audit events by seq).

A cursor is base64url JSON of the last row's sort key; decoding anything else is `ValueError("cursor")`,
which the API answers as a 422 naming the cursor.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import UTC, datetime
from typing import Any


def _iso(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def _encode_cursor(payload: dict[str, Any]) -> str:
    raw = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode_cursor(cursor: str) -> dict[str, Any]:
    try:
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        payload = json.loads(raw.decode("utf-8"))
    except (binascii.Error, UnicodeError, ValueError):
        raise ValueError("cursor") from None
    if not isinstance(payload, dict):
        raise ValueError("cursor")
    return payload


def _decode_memory_cursor(cursor: str) -> tuple[datetime, str]:
    payload = _decode_cursor(cursor)
    created, memory_id = payload.get("c"), payload.get("i")
    if set(payload) != {"c", "i"} or not isinstance(created, str) or not isinstance(memory_id, str):
        raise ValueError("cursor")
    try:
        at = datetime.fromisoformat(created)
    except ValueError:
        raise ValueError("cursor") from None
    if at.tzinfo is None:
        raise ValueError("cursor")
    return at, memory_id


def _decode_audit_cursor(cursor: str, oldest_first: bool = False) -> int:
    payload = _decode_cursor(cursor)
    seq = payload.get("s")
    expected = {"s", "o"} if oldest_first else {"s"}
    if set(payload) != expected or (oldest_first and payload.get("o") != "a"):
        raise ValueError("cursor")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        raise ValueError("cursor")
    return seq
