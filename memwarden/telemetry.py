"""OpenTelemetry for memwarden: span names, the attributes spans may carry, and the metrics.

Spans are named after the GenAI memory operations (`create_memory`, `search_memory`,
`update_memory`, `delete_memory`, plus our `revalidate_memory`) and carry the GenAI semantic
conventions' attributes where they exist (`gen_ai.operation.name`, `gen_ai.provider.name`,
`gen_ai.agent.id`, `gen_ai.memory.record.id`, `gen_ai.memory.record.count`, `gen_ai.memory.store.id`),
and `memwarden.*` ones for what they do not cover (tenant, decision, reason code, workflow id).
Content never: the conventions' opt-in `gen_ai.memory.query.text` and `gen_ai.memory.records`
are not in `ALLOWED_ATTRIBUTES`, and `set_attributes` drops every key that is.

memwarden owns its providers instead of installing global ones, so an embedding application's
own OpenTelemetry setup is left alone and tests can swap in an in-memory exporter. Spans go
nowhere unless an exporter is configured (`MEMWARDEN_OTEL_EXPORTER=otlp`); metrics are read by
Prometheus from the API's `/metrics`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer
from prometheus_client import CollectorRegistry

from memwarden.config import OtelExporter, Settings

CREATE_MEMORY = "create_memory"
SEARCH_MEMORY = "search_memory"
UPDATE_MEMORY = "update_memory"
DELETE_MEMORY = "delete_memory"
REVALIDATE_MEMORY = "revalidate_memory"
REMEMBER_CONVERSATION = "remember_conversation"
"""A conversation handed over (`POST /v1/conversations`): its candidates are `create_memory` children."""
OPERATIONS = (CREATE_MEMORY, SEARCH_MEMORY, UPDATE_MEMORY, DELETE_MEMORY, REVALIDATE_MEMORY)

PROVIDER_NAME = "memwarden"
INSTRUMENTATION = "memwarden"

# GenAI semantic conventions (development status) and memwarden's own keys.
GEN_AI_OPERATION_NAME = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME = "gen_ai.provider.name"
GEN_AI_AGENT_ID = "gen_ai.agent.id"
GEN_AI_MEMORY_STORE_ID = "gen_ai.memory.store.id"
GEN_AI_MEMORY_RECORD_ID = "gen_ai.memory.record.id"
GEN_AI_MEMORY_RECORD_COUNT = "gen_ai.memory.record.count"
ERROR_TYPE = "error.type"
TENANT = "memwarden.tenant"
ROLE = "memwarden.principal.role"
DECISION = "memwarden.decision"
REASON = "memwarden.reason"
WORKFLOW_ID = "memwarden.workflow.id"
WITHHELD_COUNT = "memwarden.withheld.count"
STALE_COUNT = "memwarden.stale.count"
REQUESTED_K = "memwarden.request.k"
CONSEQUENCE = "memwarden.consequence"
SUPERSEDES = "memwarden.supersedes"
DELETION_ID = "memwarden.deletion.id"
SELECTOR_KIND = "memwarden.selector.kind"
OUTCOME = "memwarden.outcome"
TRIGGER = "memwarden.revalidation.trigger"
SOURCE_SYSTEM = "memwarden.source.system"
NEW_MEMORY_ID = "memwarden.new_memory.id"
CHECKED_COUNT = "memwarden.checked.count"
CANDIDATE_COUNT = "memwarden.candidates.count"
STORED_COUNT = "memwarden.candidates.stored"
EXTRACTOR = "memwarden.extractor"

ALLOWED_ATTRIBUTES = frozenset(
    {
        GEN_AI_OPERATION_NAME,
        GEN_AI_PROVIDER_NAME,
        GEN_AI_AGENT_ID,
        GEN_AI_MEMORY_STORE_ID,
        GEN_AI_MEMORY_RECORD_ID,
        GEN_AI_MEMORY_RECORD_COUNT,
        ERROR_TYPE,
        TENANT,
        ROLE,
        DECISION,
        REASON,
        WORKFLOW_ID,
        WITHHELD_COUNT,
        STALE_COUNT,
        REQUESTED_K,
        CONSEQUENCE,
        SUPERSEDES,
        DELETION_ID,
        SELECTOR_KIND,
        OUTCOME,
        TRIGGER,
        SOURCE_SYSTEM,
        NEW_MEMORY_ID,
        CHECKED_COUNT,
        CANDIDATE_COUNT,
        STORED_COUNT,
        EXTRACTOR,
    }
)
"""Ids, codes and counts: the only keys memwarden puts on its spans."""

SENSITIVE_BLOCK_REASONS = frozenset({"secret_detected", "pii_detected", "staged_sensitive"})
"""Write reason codes that mean 'held back because it was sensitive' (rejected or staged)."""


@dataclass
class Metrics:
    """The instruments behind the issue's metrics; names become Prometheus series (`_total`, `_seconds`)."""

    provider: MeterProvider
    registry: CollectorRegistry

    def __post_init__(self) -> None:
        meter = self.provider.get_meter(INSTRUMENTATION)
        self.writes = meter.create_counter(
            "memwarden.writes", description="Proposed writes by decision and reason code."
        )
        self.sensitive_blocks = meter.create_counter(
            "memwarden.sensitive_write_blocks",
            description="Writes held back as sensitive (rejected or staged); divide by writes for the block rate.",
        )
        self.search_hits = meter.create_counter(
            "memwarden.search.hits", description="Memories returned by search, by freshness (stale-hit rate)."
        )
        self.searches = meter.create_counter("memwarden.searches", description="Searches answered.")
        self.withheld = meter.create_counter(
            "memwarden.search.withheld", description="Memories withheld from an answer, by reason."
        )
        self.denials = meter.create_counter(
            "memwarden.denials", description="Requests refused for scope or role (cross-scope denials), by reason."
        )
        self.revalidations = meter.create_counter(
            "memwarden.revalidations", description="Revalidation outcomes (valid, changed, gone, unavailable)."
        )
        self.rollbacks = meter.create_counter(
            "memwarden.rollbacks", description="Rollbacks requested (a writer's window, a source record, ids)."
        )
        self.quarantined = meter.create_counter(
            "memwarden.memories.quarantined", description="Memories quarantined by rollbacks."
        )
        self.influenced_answers = meter.create_counter(
            "memwarden.answers.unreviewed",
            description="Search answers that returned memory still pending review or quarantined later, by reason.",
        )
        self.conversations = meter.create_counter(
            "memwarden.conversations", description="Conversations handed over and answered, by extractor."
        )
        self.conversation_candidates = meter.create_counter(
            "memwarden.conversation.candidates",
            description="Candidates extracted from conversations, by the gate's decision and the extractor's kind.",
        )
        self.deletion_seconds = meter.create_histogram(
            "memwarden.deletion.duration",
            unit="s",
            description="Time from a forget request to its verified receipt.",
        )

    def record_rollback(self, selector_kind: str, quarantined: int) -> None:
        """One rollback requested, and the writes it quarantined (the API, once per new rollback)."""
        self.rollbacks.add(1, {"selector": selector_kind})
        if quarantined:
            self.quarantined.add(quarantined, {"selector": selector_kind})

    def record_influenced_answers(self, answers: int, reason: str) -> None:
        """Answers that returned memory nobody had reviewed: pending, or quarantined after it was served."""
        if answers:
            self.influenced_answers.add(answers, {"reason": reason})

    def record_conversation(self, extractor: str, decisions: Iterable[tuple[str, str]]) -> None:
        """One conversation answered: its extractor, and each candidate's decision by kind (codes only)."""
        self.conversations.add(1, {"extractor": extractor})
        for decision, kind in decisions:
            self.conversation_candidates.add(1, {"decision": decision, "kind": kind})

    def record_write(self, decision: str, reason: str) -> None:
        self.writes.add(1, {"decision": decision, "reason": reason})
        if reason in SENSITIVE_BLOCK_REASONS and decision in ("REJECT", "PENDING"):
            self.sensitive_blocks.add(1, {"decision": decision, "reason": reason})

    def record_search(self, freshness: Iterable[str], withheld_reasons: Iterable[str]) -> None:
        self.searches.add(1)
        for value in freshness:
            self.search_hits.add(1, {"freshness": value})
        for reason in withheld_reasons:
            self.withheld.add(1, {"reason": reason})

    def record_denial(self, reason: str, operation: str) -> None:
        self.denials.add(1, {"reason": reason, "operation": operation})

    def record_revalidation(self, outcome: str) -> None:
        self.revalidations.add(1, {"outcome": outcome})

    def record_deletion(self, seconds: float, status: str, scope: str | None = None) -> None:
        """One finished deletion: request to verified receipt, by outcome and selector kind."""
        self.deletion_seconds.record(seconds, {"status": status, **({"scope": scope} if scope else {})})


@dataclass
class Telemetry:
    """One process's tracer and meter providers."""

    tracer_provider: TracerProvider
    metrics: Metrics
    readers: list[MetricReader] = field(default_factory=list)

    @property
    def tracer(self) -> Tracer:
        return self.tracer_provider.get_tracer(INSTRUMENTATION)

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.metrics.provider.shutdown()


_current: Telemetry | None = None


def setup(
    settings: Settings | None = None,
    *,
    span_exporter: SpanExporter | None = None,
    metric_readers: Iterable[MetricReader] = (),
) -> Telemetry:
    """Build this process's providers and make them current.

    `span_exporter` (tests: the SDK's InMemorySpanExporter) is exported synchronously; otherwise
    the settings decide: no exporter by default, OTLP over HTTP (batched) with `otel_exporter=otlp`.
    Metrics always feed a Prometheus registry of their own (served at the API's `/metrics`).
    """
    global _current
    service = _service_name(settings)
    resource = Resource.create({"service.name": service})
    tracer_provider = TracerProvider(resource=resource)
    if span_exporter is not None:
        tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    elif settings is not None and settings.otel_exporter is OtelExporter.OTLP:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=settings.otel_endpoint) if settings.otel_endpoint else OTLPSpanExporter()
        tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    from opentelemetry.exporter.prometheus import PrometheusMetricReader

    registry = CollectorRegistry(auto_describe=True)
    readers: list[MetricReader] = [PrometheusMetricReader(registry=registry), *metric_readers]
    meter_provider = MeterProvider(resource=resource, metric_readers=readers)
    _current = Telemetry(tracer_provider, Metrics(meter_provider, registry), readers)
    return _current


def _service_name(settings: Settings | None) -> str:
    """MEMWARDEN_OTEL_SERVICE_NAME when set, else the SDK's standard OTEL_SERVICE_NAME, else memwarden."""
    if settings is not None and "otel_service_name" in settings.model_fields_set:
        return settings.otel_service_name
    return os.environ.get("OTEL_SERVICE_NAME") or (settings.otel_service_name if settings else "memwarden")


def current() -> Telemetry:
    """The current telemetry; a default one (no span exporter) on first use."""
    return _current if _current is not None else setup()


def tracer() -> Tracer:
    return current().tracer


def metrics() -> Metrics:
    return current().metrics


def set_attributes(span: Span, attributes: Mapping[str, Any]) -> None:
    """Set only allowed keys, only scalar or list-of-scalar values, None skipped."""
    for key, value in attributes.items():
        if key not in ALLOWED_ATTRIBUTES or value is None:
            continue
        if isinstance(value, str | bool | int | float):
            span.set_attribute(key, value)


@contextmanager
def operation_span(
    name: str,
    *,
    tenant: str | None = None,
    role: str | None = None,
    agent: str | None = None,
    attributes: Mapping[str, Any] | None = None,
) -> Iterator[Span]:
    """A span for one memory operation, with the GenAI attributes that identify it.

    An exception marks the span as failed with its class name only (messages may hold input).
    """
    with tracer().start_as_current_span(
        name, kind=SpanKind.SERVER, record_exception=False, set_status_on_exception=False
    ) as span:
        set_attributes(
            span,
            {
                GEN_AI_OPERATION_NAME: name,
                GEN_AI_PROVIDER_NAME: PROVIDER_NAME,
                TENANT: tenant,
                ROLE: role,
                GEN_AI_AGENT_ID: agent,
                **(attributes or {}),
            },
        )
        try:
            yield span
        except BaseException as exc:
            already = getattr(span, "attributes", None) or {}
            if ERROR_TYPE not in already:  # a caller may have named the error better (a problem code)
                mark_error(span, type(exc).__name__)
            raise


def start_operation_span(name: str, *, tenant: str | None = None, attributes: Mapping[str, Any] | None = None) -> Span:
    """A started span for an operation that outlives one block (several run concurrently): end it yourself.

    Its parent is the current span (an activity's), so it joins the trace of the request that caused it.
    """
    span = tracer().start_span(name, kind=SpanKind.INTERNAL, record_exception=False, set_status_on_exception=False)
    set_attributes(
        span,
        {GEN_AI_OPERATION_NAME: name, GEN_AI_PROVIDER_NAME: PROVIDER_NAME, TENANT: tenant, **(attributes or {})},
    )
    return span


def mark_error(span: Span, error_type: str) -> None:
    """Failed, with a code or class name as the only description."""
    span.set_attribute(ERROR_TYPE, error_type)
    span.set_status(Status(StatusCode.ERROR, error_type))
