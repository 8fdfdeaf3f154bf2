"""The codec endpoint decodes with the same keys as the worker, retired ones included."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from types import SimpleNamespace

from temporalio.api.common.v1 import Payload

from api.routes.codec import _codec
from memwarden.config import Settings
from memwarden.temporal.codec import AesGcmCodec


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


async def test_history_sealed_before_a_rotation_still_decodes(tmp_path: Path) -> None:
    old, new = os.urandom(32), os.urandom(32)
    [sealed] = await AesGcmCodec(old).encode([Payload(metadata={"encoding": b"json/plain"}, data=b'"before"')])
    rotated = Settings(data_dir=tmp_path, codec_key=_b64(new), codec_old_keys=[_b64(old)])
    [opened] = await _codec(SimpleNamespace(settings=rotated)).decode([sealed])  # type: ignore[arg-type]
    assert opened.data == b'"before"'
    fresh = await _codec(SimpleNamespace(settings=rotated)).encode([opened])  # type: ignore[arg-type]
    assert await AesGcmCodec(new).decode(fresh) == [opened]  # new payloads use the current key
