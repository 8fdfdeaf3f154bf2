"""One way to reach Temporal, shared by the API, the worker and the CLI, so all speak the same codec.

The data converter (`memwarden.temporal.converter`) seals every payload, failure and header.
"""

from __future__ import annotations

from collections.abc import Mapping

from temporalio.client import Client
from temporalio.common import HeaderCodecBehavior
from temporalio.contrib.opentelemetry import TracingInterceptor
from temporalio.service import TLSConfig

from memwarden import telemetry
from memwarden.config import Settings
from memwarden.temporal.converter import data_converter


def tls_config(settings: Settings) -> TLSConfig | bool:
    """False (plaintext), True (system CAs) or a TLSConfig with the configured CA and client pair (mTLS)."""
    files = (settings.temporal_tls_ca_file, settings.temporal_tls_cert_file, settings.temporal_tls_key_file)
    if not settings.temporal_tls and not any(files) and not settings.temporal_tls_server_name:
        return False
    if (settings.temporal_tls_cert_file is None) != (settings.temporal_tls_key_file is None):
        raise ValueError("MEMWARDEN_TEMPORAL_TLS_CERT_FILE and MEMWARDEN_TEMPORAL_TLS_KEY_FILE go together")
    if not any(files) and not settings.temporal_tls_server_name:
        return True
    ca, cert, key = (path.read_bytes() if path is not None else None for path in files)
    return TLSConfig(
        server_root_ca_cert=ca, client_cert=cert, client_private_key=key, domain=settings.temporal_tls_server_name
    )


async def connect(settings: Settings, *, old_keys: Mapping[str, bytes] | None = None) -> Client:
    """A client for settings.temporal_address / temporal_namespace, over TLS when configured."""
    return await Client.connect(
        settings.temporal_address,
        namespace=settings.temporal_namespace,
        data_converter=data_converter(settings, old_keys=old_keys),
        tls=tls_config(settings),
        # Links API spans to workflow and activity spans (trace context travels in Temporal headers);
        # workers built on this client inherit it.
        interceptors=[TracingInterceptor(telemetry.tracer())],
        # Headers (the trace context among them) are sealed by the codec like every other payload.
        header_codec_behavior=HeaderCodecBehavior.CODEC,
    )
