"""Source connectors against a real HTTP system of record run by the test (values, versions, delays, outages)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from memwarden.records import RevalidationOutcome, SourceRef
from memwarden.stores.sources import (
    CONNECTOR_KINDS,
    SourceAnswer,
    SourceConfig,
    SourceRegistry,
    SourcesConfigError,
    UnsafeKey,
    parse_sources,
    record_url,
    register_connector_kind,
)
from tests.source_server import SourceServer, sources_toml

U, C, G, N = (
    RevalidationOutcome.UNCHANGED,
    RevalidationOutcome.CHANGED,
    RevalidationOutcome.GONE,
    RevalidationOutcome.UNAVAILABLE,
)


@pytest.fixture
def src() -> SourceServer:
    with SourceServer() as server:
        yield server


def registry(src: SourceServer, **fields: object) -> SourceRegistry:
    return SourceRegistry([SourceConfig(name="programs", url=src.url, **fields)])


async def test_the_protocol_304_200_404_410(src: SourceServer) -> None:
    reg = registry(src)
    src.put("p-1", "synthetic: starts 2027-03-01", "v1")
    try:
        first = await reg.fetch("programs", "p-1", None)
        assert (first.outcome, first.content, first.version) == (C, "synthetic: starts 2027-03-01", "v1")
        same = await reg.fetch("programs", "p-1", "v1")
        assert (same.outcome, same.reason, same.content) == (U, "not_modified", None)
        assert src.state.conditional[-1] == '"v1"'  # the recorded version goes out as an entity-tag
        src.put("p-1", "synthetic: starts 2027-04-15", "v2")
        moved = await reg.fetch("programs", "p-1", "v1")
        assert (moved.outcome, moved.content, moved.version) == (C, "synthetic: starts 2027-04-15", "v2")
        src.delete("p-1", 404)
        assert (await reg.fetch("programs", "p-1", "v2")).outcome is G
        src.delete("p-1", 410)
        gone = await reg.fetch("programs", "p-1", "v2")
        assert (gone.outcome, gone.reason) == (G, "http_410")
        assert (await reg.fetch("programs", "never-existed", None)).outcome is G
    finally:
        await reg.close()


async def test_keys_are_escaped_into_the_path(src: SourceServer) -> None:
    reg = registry(src)
    src.put("a/b c?d", "synthetic: odd key", "v1")
    try:
        assert (await reg.fetch("programs", "a/b c?d", None)).content == "synthetic: odd key"
        assert src.requests("a/b c?d") == 1
    finally:
        await reg.close()


async def test_a_hanging_source_answers_unavailable_within_its_timeout(src: SourceServer) -> None:
    reg = registry(src, timeout_ms=200)
    src.put("p-1", "synthetic", "v1")
    src.set(delay=3.0)
    try:
        started = time.monotonic()
        answer = await reg.fetch("programs", "p-1", "v1")
        elapsed = time.monotonic() - started
        assert (answer.outcome, answer.reason) == (N, "timeout")
        assert elapsed < 1.0, elapsed  # bounded by the 200 ms deadline, not by the 3 s hang
    finally:
        await reg.close()


@pytest.mark.parametrize(("mode", "reason"), [("down", "http_503"), ("drop", "connect_error")])
async def test_outages_are_unavailable(src: SourceServer, mode: str, reason: str) -> None:
    reg = registry(src)
    src.put("p-1", "synthetic", "v1")
    src.set(mode=mode)
    try:
        answer = await reg.fetch("programs", "p-1", "v1")
        assert (answer.outcome, answer.reason, answer.content) == (N, reason, None)
    finally:
        await reg.close()


async def test_a_source_that_is_not_listening(src: SourceServer) -> None:
    port = src.port
    src.__exit__()
    reg = SourceRegistry([SourceConfig(name="programs", url=f"http://127.0.0.1:{port}/records/{{key}}")])
    try:
        assert (await reg.fetch("programs", "p-1", None)).reason == "connect_error"
    finally:
        await reg.close()


async def test_flapping_alternates_between_outage_and_answer(src: SourceServer) -> None:
    reg = registry(src)
    src.put("p-1", "synthetic", "v1")
    src.set(mode="flap")
    try:
        outcomes = [(await reg.fetch("programs", "p-1", "v1")).outcome for _ in range(4)]
        assert outcomes == [N, U, N, U]
    finally:
        await reg.close()


async def test_malformed_answers_are_unavailable_never_a_value(src: SourceServer) -> None:
    from memwarden.stores.sources import _interpret

    assert _interpret(200, None, b"not json", None).reason == "bad_body"
    assert _interpret(200, None, b'{"version": "v1"}', None).reason == "bad_body"
    assert _interpret(200, None, b'{"content": "", "version": "v1"}', None).reason == "bad_body"
    assert _interpret(200, None, b'{"content": "x", "version": 3}', None).reason == "bad_body"
    assert _interpret(200, None, b"[1, 2]", None).reason == "bad_body"
    assert _interpret(200, None, b'{"content": "x"}' + b" " * 70_000, None).reason == "bad_body"
    assert _interpret(500, None, b"", "v1").outcome is N
    etag_only = _interpret(200, 'W/"v9"', b'{"content": "x"}', None)
    assert (etag_only.outcome, etag_only.version) == (C, "v9")


async def test_an_unconfigured_system_is_unavailable_at_once() -> None:
    reg = SourceRegistry([])
    answer = await reg.fetch("nowhere", "k", None)
    assert (answer.outcome, answer.reason) == (N, "unknown_source")


def test_sources_toml_is_parsed_and_errors_name_the_source_and_field(tmp_path: Path) -> None:
    path = tmp_path / "sources.toml"
    path.write_text(
        sources_toml("programs", "http://127.0.0.1:9000/records/{key}", timeout_ms=300, volatile=True)
        + sources_toml("hr", "http://127.0.0.1:9001/people/{key}", principals=["svc-hr"], system_of_record=False)
    )
    reg = SourceRegistry.from_file(path)
    programs, hr = reg.config("programs"), reg.config("hr")
    assert programs is not None and programs.timeout == 0.3 and programs.volatile and programs.owned_by("programs")
    assert hr is not None and hr.owned_by("svc-hr") and not hr.owned_by("hr") and not hr.system_of_record
    assert reg.volatile_systems() == ["programs"]
    assert SourceRegistry.from_file(tmp_path / "absent.toml").configs == {}
    bad = [
        ({"sources": {"p": {"url": "http://x/no-key"}}}, "sources.p: invalid url"),
        ({"sources": {"p": {"url": "http://x/{key}", "timeout_ms": 0}}}, "sources.p: invalid timeout_ms"),
        ({"sources": {"p": {"url": "http://x/{key}", "timeout_ms": 60_000}}}, "sources.p: invalid timeout_ms"),
        ({"sources": {"p": {"url": "http://x/{key}", "colour": "red"}}}, "sources.p: invalid colour"),
        ({"sources": {"p": {"url": "http://x/{key}", "kind": "ftp"}}}, "sources.p: unknown kind"),
        ({"sources": {"bad name": {"url": "http://x/{key}"}}}, "sources.bad name: invalid name"),
        ({"sources": {"p": 3}}, "sources.p: must be a table"),
    ]
    for data, message in bad:
        with pytest.raises(SourcesConfigError, match=message):
            parse_sources(data)
    path.write_text("[sources.p\nurl=")
    with pytest.raises(SourcesConfigError, match="not valid TOML"):
        SourceRegistry.from_file(path)


async def test_another_connector_kind_joins_through_the_registry() -> None:
    class Fixed:
        """A connector kind of the test's own: every record unchanged."""

        def __init__(self, config: SourceConfig) -> None:
            self.config = config
            self.closed = False

        async def fetch(self, key: str, version: str | None, *, tenant: str, owner: str) -> SourceAnswer:
            return SourceAnswer(outcome=U, reason="fixed", version=version)

        async def close(self) -> None:
            self.closed = True

    register_connector_kind("fixed", Fixed)
    try:
        [config] = parse_sources({"sources": {"ledger": {"kind": "fixed", "url": "ledger://{key}"}}})
        reg = SourceRegistry([config])
        answer = await reg.fetch("ledger", "k", "v3")
        assert (answer.outcome, answer.reason, answer.version) == (U, "fixed", "v3")
        connector = reg.connector("ledger")
        await reg.close()
        assert isinstance(connector, Fixed) and connector.closed
    finally:
        CONNECTOR_KINDS.pop("fixed", None)


def test_record_urls_keep_the_templates_path() -> None:
    """Each value is one percent-encoded segment; `.`, `..` and empty values never reach the source."""
    template = "http://127.0.0.1:9000/t/{tenant}/o/{owner}/records/{key}"
    url = record_url(template, "a/b ?#%", tenant="acme", owner="agent:x")
    assert url == "http://127.0.0.1:9000/t/acme/o/agent%3Ax/records/a%2Fb%20%3F%23%25"
    for bad in ({"key": "."}, {"key": ".."}, {"key": ""}, {"key": "k", "tenant": ".."}, {"key": "k", "owner": "."}):
        values = {"tenant": "acme", "owner": "alice"} | bad
        key = values.pop("key")
        with pytest.raises(UnsafeKey):
            record_url(template, key, **values)
    # Only the placeholders the template names are filled in.
    assert record_url("http://h/records/{key}", "k") == "http://h/records/k"


async def test_a_key_that_would_change_the_path_is_never_fetched(src: SourceServer) -> None:
    reg = registry(src)
    src.put("..", "synthetic: not a record", "v1")
    try:
        answer = await reg.fetch("programs", "..", None)
        assert (answer.outcome, answer.reason) == (N, "unsafe_key")
        assert src.state.paths == []
    finally:
        await reg.close()


def test_who_may_vouch_for_a_source_ref() -> None:
    reg = SourceRegistry(
        [
            SourceConfig(name="crm", url="http://h/t/{tenant}/o/{owner}/r/{key}"),
            SourceConfig(name="hr", url="http://h/r/{key}", principals=("svc-hr",)),
            SourceConfig(name="half", url="http://h/o/{owner}/r/{key}"),
        ]
    )

    def vouch(system: str, key: str = "k", principal: str | None = None) -> str | None:
        return reg.vouch(SourceRef(system=system, key=key), system_principal=principal, tenant="t1", owner="alice")

    assert vouch("crm") is None  # scoped to tenant and owner: anyone in the tenant may cite it
    assert vouch("hr") == "source_ref_not_vouched"
    assert vouch("half") == "source_ref_not_vouched"  # owners of two tenants could share an id
    assert vouch("hr", principal="svc-hr") is None
    assert vouch("hr", principal="svc-crm") == "forbidden_source"
    assert vouch("ledger") == "unknown_source"
