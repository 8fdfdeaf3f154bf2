"""Telemetry setup: no span export by default, OTLP over real HTTP when configured, allowed keys only."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memwarden import telemetry
from memwarden.config import Settings


class _Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, bytes]] = []  # noqa: RUF012

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        _Collector.received.append((self.path, body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[str]:
    """A real HTTP server standing where an OTLP collector would."""
    _Collector.received = []
    server = HTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/v1/traces"
    finally:
        server.shutdown()
        server.server_close()


def test_spans_are_exported_nowhere_by_default(tmp_path: Path) -> None:
    t = telemetry.setup(Settings(data_dir=tmp_path))
    assert t.tracer_provider._active_span_processor._span_processors == ()  # no processor: nothing leaves


def test_otlp_exporter_sends_spans_over_http(tmp_path: Path, collector: str) -> None:
    t = telemetry.setup(Settings(data_dir=tmp_path, otel_exporter="otlp", otel_endpoint=collector))  # type: ignore[arg-type]
    with telemetry.operation_span(telemetry.CREATE_MEMORY, tenant="acme", role="agent", agent="planner"):
        pass
    assert t.tracer_provider.force_flush(10_000)
    [(path, body)] = _Collector.received
    assert path == "/v1/traces"
    request = ExportTraceServiceRequest.FromString(body)
    [span] = [s for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert span.name == "create_memory"
    attrs = {a.key: a.value.string_value for a in span.attributes}
    assert attrs["gen_ai.operation.name"] == "create_memory" and attrs["memwarden.tenant"] == "acme"
    t.shutdown()


def test_only_allowed_keys_and_scalar_values_reach_a_span(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    telemetry.setup(Settings(data_dir=tmp_path), span_exporter=exporter)
    with telemetry.operation_span(telemetry.SEARCH_MEMORY, tenant="t") as span:
        telemetry.set_attributes(
            span,
            {
                "gen_ai.memory.query.text": "what the user asked",
                "content": "secret",
                telemetry.GEN_AI_MEMORY_RECORD_COUNT: 3,
                telemetry.REASON: {"nested": "no"},
                telemetry.DECISION: None,
            },
        )
    [finished] = exporter.get_finished_spans()
    assert dict(finished.attributes or {}) == {
        "gen_ai.operation.name": "search_memory",
        "gen_ai.provider.name": "memwarden",
        "memwarden.tenant": "t",
        "gen_ai.memory.record.count": 3,
    }


def test_a_failing_operation_names_the_error_class_not_its_message(tmp_path: Path) -> None:
    exporter = InMemorySpanExporter()
    telemetry.setup(Settings(data_dir=tmp_path), span_exporter=exporter)
    with pytest.raises(ValueError), telemetry.operation_span(telemetry.UPDATE_MEMORY):
        raise ValueError("the user's words would be here")
    [finished] = exporter.get_finished_spans()
    assert finished.attributes["error.type"] == "ValueError"
    assert finished.status.description == "ValueError" and not finished.events


def test_service_name_follows_the_sdk_variable_unless_memwarden_names_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_SERVICE_NAME", "memwarden-worker")
    t = telemetry.setup(Settings(data_dir=tmp_path))
    assert t.tracer_provider.resource.attributes["service.name"] == "memwarden-worker"
    t = telemetry.setup(Settings(data_dir=tmp_path, otel_service_name="mw-api"))
    assert t.tracer_provider.resource.attributes["service.name"] == "mw-api"
    monkeypatch.delenv("OTEL_SERVICE_NAME")
    assert (
        telemetry.setup(Settings(data_dir=tmp_path)).tracer_provider.resource.attributes["service.name"] == "memwarden"
    )
