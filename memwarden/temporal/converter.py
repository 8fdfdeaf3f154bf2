"""The data converter every client, worker and replayer uses, so all read and write the same history.

Pydantic models travel as JSON, then every payload, and every failure message and stack trace,
is encrypted by `AesGcmCodec` before it leaves the process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, DefaultFailureConverterWithEncodedAttributes

from memwarden.config import Settings
from memwarden.temporal.codec import AesGcmCodec, key_id


def data_converter(settings: Settings, *, old_keys: Mapping[str, bytes] | None = None) -> DataConverter:
    """Pydantic JSON payloads sealed with the settings' codec key; failure text is encoded (encrypted) too.

    Without `old_keys`, the settings' retired keys (`MEMWARDEN_CODEC_OLD_KEYS`) decode older history.
    """
    if old_keys is None:
        old_keys = {key_id(k): k for k in settings.codec_old_key_bytes}
    return dataclasses.replace(
        pydantic_data_converter,
        payload_codec=AesGcmCodec(settings.codec_key_bytes, old_keys, accept_plaintext=settings.codec_accept_plaintext),
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )
