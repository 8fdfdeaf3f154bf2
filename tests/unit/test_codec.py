"""The payload codec: history holds only ciphertext, keys rotate, and old plain history still reads."""

from __future__ import annotations

import base64
import os

import pytest
from pydantic import BaseModel
from temporalio.api.common.v1 import Payload

from memwarden.config import Settings
from memwarden.temporal.codec import ENCODING, KEY_ID_METADATA, REFUSED_ENCODING, AesGcmCodec, CodecError, key_id
from memwarden.temporal.converter import data_converter

SECRET = b"my bank PIN is 4921 and I live at 12 Elm Street"


def _plain(data: bytes = SECRET) -> Payload:
    return Payload(metadata={"encoding": b"json/plain", "extra": b"x"}, data=data)


def _key() -> bytes:
    return os.urandom(32)


async def test_round_trip() -> None:
    codec = AesGcmCodec(_key())
    originals = [_plain(), _plain(b""), _plain(b"\x00" * 5000)]
    encoded = await codec.encode(originals)
    assert len(encoded) == 3
    for enc in encoded:
        assert enc.metadata["encoding"] == ENCODING
        assert enc.metadata[KEY_ID_METADATA] == codec.key_id.encode()
    assert await codec.decode(encoded) == originals


async def test_ciphertext_hides_plaintext_and_metadata() -> None:
    codec = AesGcmCodec(_key())
    (enc,) = await codec.encode([_plain()])
    assert SECRET not in enc.data
    assert b"4921" not in enc.data
    assert b"json/plain" not in enc.SerializeToString()
    (again,) = await codec.encode([_plain()])
    assert again.data != enc.data  # fresh nonce each time


async def test_tampered_ciphertext_fails() -> None:
    codec = AesGcmCodec(_key())
    (enc,) = await codec.encode([_plain()])
    flipped = bytearray(enc.data)
    flipped[-1] ^= 0x01
    with pytest.raises(CodecError):
        await codec.decode([Payload(metadata=dict(enc.metadata), data=bytes(flipped))])
    with pytest.raises(CodecError):
        await codec.decode([Payload(metadata=dict(enc.metadata), data=enc.data[:8])])


async def test_wrong_key_fails() -> None:
    writer, reader = AesGcmCodec(_key()), AesGcmCodec(_key())
    (enc,) = await writer.encode([_plain()])
    with pytest.raises(CodecError, match="no decryption key"):
        await reader.decode([enc])
    forged = Payload(metadata={"encoding": ENCODING, KEY_ID_METADATA: reader.key_id.encode()}, data=enc.data)
    with pytest.raises(CodecError, match="authentication"):
        await reader.decode([forged])


async def test_old_key_decodes_after_rotation() -> None:
    old, new = _key(), _key()
    (written_before,) = await AesGcmCodec(old).encode([_plain()])
    rotated = AesGcmCodec(new, {key_id(old): old})
    assert await rotated.decode([written_before]) == [_plain()]
    (written_after,) = await rotated.encode([_plain()])
    assert written_after.metadata[KEY_ID_METADATA] == key_id(new).encode()
    with pytest.raises(CodecError):
        await AesGcmCodec(old).decode([written_after])


async def test_unencrypted_payloads_are_refused_unless_history_predates_the_codec() -> None:
    """A plaintext input or update sent straight to Temporal is not acted on; old history reads on opt-in."""
    legacy = [_plain(), Payload(metadata={"encoding": b"binary/null"}), Payload()]
    refused = await AesGcmCodec(_key()).decode(legacy)
    assert refused == [Payload(metadata={"encoding": REFUSED_ENCODING})] * 3  # the plaintext is dropped
    converter = data_converter(Settings(codec_key=base64.b64encode(_key()).decode()))
    with pytest.raises(KeyError, match="refused-unencrypted"):
        converter.payload_converter.from_payloads(refused[:1])  # nothing reads it: the input is rejected
    assert await AesGcmCodec(_key(), accept_plaintext=True).decode(legacy) == legacy


def test_bad_keys_rejected() -> None:
    with pytest.raises(ValueError):
        AesGcmCodec(b"short")
    old = _key()
    with pytest.raises(ValueError):
        AesGcmCodec(_key(), {"deadbeef": old})
    with pytest.raises(ValueError):
        AesGcmCodec(_key(), {key_id(b"x" * 16): b"x" * 16})
    assert key_id(old) == key_id(old) and len(key_id(old)) == 8


class _Fact(BaseModel):
    content: str
    n: int


async def test_data_converter_encrypts_pydantic_payloads() -> None:
    settings = Settings(codec_key=base64.b64encode(_key()).decode())
    converter = data_converter(settings)
    fact = _Fact(content=SECRET.decode(), n=3)
    (payload,) = await converter.encode([fact])
    assert payload.metadata["encoding"] == ENCODING
    assert SECRET not in payload.SerializeToString()
    assert await converter.decode([payload], [_Fact]) == [fact]
