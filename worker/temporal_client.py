"""One way to reach Temporal, shared by the API, the worker and the CLI, so all speak the same codec.

Pydantic models travel as JSON, then every payload, and every failure message and stack trace,
is encrypted by `AesGcmCodec` before it leaves the process.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter, DefaultFailureConverterWithEncodedAttributes

from memwarden.config import Settings
from worker.codec import AesGcmCodec


def data_converter(settings: Settings, *, old_keys: Mapping[str, bytes] | None = None) -> DataConverter:
    """Pydantic JSON payloads sealed with the settings' codec key; failure text is encoded (encrypted) too."""
    return dataclasses.replace(
        pydantic_data_converter,
        payload_codec=AesGcmCodec(settings.codec_key_bytes, old_keys),
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
    )


async def connect(settings: Settings, *, old_keys: Mapping[str, bytes] | None = None) -> Client:
    """A client for settings.temporal_address / temporal_namespace, TLS when settings.temporal_tls."""
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=data_converter(settings, old_keys=old_keys),
        tls=settings.temporal_tls,
    )
