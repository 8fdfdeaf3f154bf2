"""Systems of record: where a remembered fact can be checked, configured in `sources.toml`.

```toml
[sources.programs]
url = "http://127.0.0.1:9000/t/{tenant}/people/{owner}/records/{key}"
                                               # {key} from the memory's source_ref; {tenant} and {owner}
                                               # (optional) the memory's tenant and owner
timeout_ms = 300                               # the read-time deadline for this source
freshness_seconds = 3600                       # optional: confirmed this long, then checked at the next read
volatile = false                               # optional: the periodic schedule re-checks its memories
system_of_record = true                        # optional: the designated owner of the facts it serves
principals = ["programs"]                      # optional: system tokens (sub) that may post its events
```

Protocol (HTTP kind): `GET url` with `If-None-Match: <version>` -> 304 unchanged, 200
`{"content", "version"}` changed (or unchanged when the content is the same), 404/410 gone; any other
status, a malformed body, a connection error or no answer within `timeout_ms`: unavailable.

Who may cite a source (`SourceRegistry.vouch`): a memory's `source_ref` makes the service fetch that
record and, when it changed, store its content in the memory's namespace, so a writer could otherwise
have another person's record copied into a namespace it reads (a confused deputy). A `source_ref` is
accepted from the source's own principal (a `system` token whose `sub` is in `principals`), or from
anyone when the source scopes every key to the memory's tenant and owner (its URL names `{tenant}` and
`{owner}`): then every fetch asks "this key, of this owner", and a key of someone else's answers 404.
Each value goes into the URL as one percent-encoded path segment; `.`, `..` and any value whose URL
would not keep the template's path are refused, so a key never reaches another resource.

Connectors are looked up by `kind` in a registry (`register_connector_kind`), so another kind (a
database view, a queue-backed cache) joins without touching revalidation. They run inside
activities only; workflows see outcome codes.
"""

from __future__ import annotations

import asyncio
import json
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote, urlsplit

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memwarden.records import RevalidationOutcome, SourceRef

NAME_PATTERN = r"^[A-Za-z0-9_.-]+$"
MAX_BODY_BYTES = 64 * 1024
"""A source answer larger than this is not a memory value: treated as a malformed answer (unavailable)."""


class SourceConfig(BaseModel):
    """One system of record, as `sources.toml` declares it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64, pattern=NAME_PATTERN)
    kind: str = Field(default="http", min_length=1)
    url: str = Field(min_length=1)
    timeout_ms: int = Field(default=300, gt=0, le=5_000)
    """The read-time deadline; at most 5 s, well inside the search step's own 10 s limit."""
    freshness_seconds: int | None = Field(default=None, ge=0)
    volatile: bool = False
    system_of_record: bool = True
    principals: tuple[str, ...] = ()

    @field_validator("url")
    @classmethod
    def _has_key(cls, value: str) -> str:
        if "{key}" not in value:
            raise ValueError("url must contain {key}")
        return value

    @property
    def timeout(self) -> float:
        return self.timeout_ms / 1000.0

    def owned_by(self, sub: str) -> bool:
        """Whether a system principal with this `sub` speaks for this source (default: its own name)."""
        return sub in (self.principals or (self.name,))

    @property
    def scoped_to_owner(self) -> bool:
        """Every key is asked of one tenant's one owner (the URL names both): the source vouches for ownership."""
        return "{tenant}" in self.url and "{owner}" in self.url


class UnsafeKey(ValueError):
    """A key (or tenant, or owner) that would not stay one path segment of the source's URL."""


def _segment(value: str) -> str:
    if value in ("", ".", ".."):
        raise UnsafeKey("not a path segment")
    return quote(value, safe="")


def record_url(template: str, key: str, *, tenant: str = "", owner: str = "") -> str:
    """The URL of one record: each value one percent-encoded segment, the template's path kept as written.

    Raises UnsafeKey for `.`/`..` (which an HTTP client resolves away) and for any value after which the
    URL's path, as the client would send it, differs from the text the template produced.
    """
    url = template
    if "{tenant}" in url:
        url = url.replace("{tenant}", _segment(tenant))
    if "{owner}" in url:
        url = url.replace("{owner}", _segment(owner))
    url = url.replace("{key}", _segment(key))
    written = urlsplit(url).path or "/"
    try:
        sent = httpx.URL(url).raw_path.split(b"?", 1)[0].decode("ascii")
    except (httpx.InvalidURL, UnicodeDecodeError):
        raise UnsafeKey("not a valid URL") from None
    if sent != written:
        raise UnsafeKey("changes the path")
    return url


class SourceAnswer(BaseModel):
    """What a source said about one record. `content` is memory content: never logged or put in history."""

    outcome: RevalidationOutcome
    reason: str
    """A code: not_modified, same_content, new_value, http_404, http_410, http_503, timeout, connect_error,
    bad_body, unknown_source."""
    content: str | None = None
    version: str | None = None


class Connector(Protocol):
    """A kind of system of record. `fetch` never raises for the source's own failures: it answers unavailable."""

    config: SourceConfig

    async def fetch(self, key: str, version: str | None, *, tenant: str, owner: str) -> SourceAnswer: ...

    async def close(self) -> None: ...


def _etag(version: str) -> str:
    """An entity-tag for If-None-Match: the version quoted, unless it already is (or is weak)."""
    if version.startswith('"') or version.startswith("W/"):
        return version
    return f'"{version}"'


def _unquote(tag: str | None) -> str | None:
    if tag is None:
        return None
    tag = tag.strip()
    if tag.startswith("W/"):
        tag = tag[2:]
    return tag[1:-1] if len(tag) >= 2 and tag[0] == tag[-1] == '"' else tag


class HttpConnector:
    """The HTTP kind: conditional GET with If-None-Match, one pooled client per source."""

    def __init__(self, config: SourceConfig, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(config.timeout),
            transport=transport,
            follow_redirects=False,
            headers={"Accept": "application/json"},
        )

    def url(self, key: str, *, tenant: str = "", owner: str = "") -> str:
        return record_url(self.config.url, key, tenant=tenant, owner=owner)

    async def fetch(self, key: str, version: str | None, *, tenant: str = "", owner: str = "") -> SourceAnswer:
        """One conditional GET, bounded by the source's timeout from the first byte sent to the last read."""
        deadline = self.config.timeout
        headers = {"If-None-Match": _etag(version)} if version else {}
        try:
            url = self.url(key, tenant=tenant, owner=owner)
        except UnsafeKey:
            return SourceAnswer(outcome=RevalidationOutcome.UNAVAILABLE, reason="unsafe_key")
        try:
            async with asyncio.timeout(deadline):
                response = await self._client.get(url, headers=headers, timeout=httpx.Timeout(max(deadline, 0.001)))
                body = response.content
        except (TimeoutError, httpx.TimeoutException):
            return SourceAnswer(outcome=RevalidationOutcome.UNAVAILABLE, reason="timeout")
        except httpx.HTTPError:
            return SourceAnswer(outcome=RevalidationOutcome.UNAVAILABLE, reason="connect_error")
        return _interpret(response.status_code, response.headers.get("etag"), body, version)

    async def close(self) -> None:
        await self._client.aclose()


def _interpret(status: int, etag: str | None, body: bytes, sent_version: str | None) -> SourceAnswer:
    if status == 304:
        return SourceAnswer(outcome=RevalidationOutcome.UNCHANGED, reason="not_modified", version=sent_version)
    if status in (404, 410):
        return SourceAnswer(outcome=RevalidationOutcome.GONE, reason=f"http_{status}")
    if status != 200:
        return SourceAnswer(outcome=RevalidationOutcome.UNAVAILABLE, reason=f"http_{status}")
    if len(body) > MAX_BODY_BYTES:
        return SourceAnswer(outcome=RevalidationOutcome.UNAVAILABLE, reason="bad_body")
    try:
        parsed = json.loads(body)
    except ValueError:
        return SourceAnswer(outcome=RevalidationOutcome.UNAVAILABLE, reason="bad_body")
    content = parsed.get("content") if isinstance(parsed, dict) else None
    version = parsed.get("version") if isinstance(parsed, dict) else None
    if not isinstance(content, str) or not content or (version is not None and not isinstance(version, str)):
        return SourceAnswer(outcome=RevalidationOutcome.UNAVAILABLE, reason="bad_body")
    return SourceAnswer(
        outcome=RevalidationOutcome.CHANGED, reason="new_value", content=content, version=version or _unquote(etag)
    )


ConnectorFactory = Callable[[SourceConfig], Connector]

CONNECTOR_KINDS: dict[str, ConnectorFactory] = {"http": HttpConnector}
"""Connector kinds by `kind` in sources.toml; `register_connector_kind` adds one."""


def register_connector_kind(kind: str, factory: ConnectorFactory) -> None:
    """Let another kind of system of record join (its factory builds a Connector from its config)."""
    CONNECTOR_KINDS[kind] = factory


class SourcesConfigError(ValueError):
    """sources.toml is malformed: names the source and the field at fault, never a value."""


def parse_sources(data: Mapping[str, Any]) -> list[SourceConfig]:
    """`[sources.<name>]` tables -> configs; unknown kinds and bad fields fail naming the source."""
    tables = data.get("sources", {})
    if not isinstance(tables, dict):
        raise SourcesConfigError("sources: must be a table of [sources.<name>] tables")
    configs = []
    for name, table in tables.items():
        if not isinstance(table, dict):
            raise SourcesConfigError(f"sources.{name}: must be a table")
        try:
            config = SourceConfig(name=name, **table)
        except ValidationError as exc:
            fields = ", ".join(".".join(str(p) for p in e["loc"]) or "name" for e in exc.errors())
            raise SourcesConfigError(f"sources.{name}: invalid {fields}") from None
        if config.kind not in CONNECTOR_KINDS:
            raise SourcesConfigError(f"sources.{name}: unknown kind {config.kind!r}")
        configs.append(config)
    return configs


class SourceRegistry:
    """The configured systems of record and one connector each, opened once per process."""

    def __init__(self, configs: list[SourceConfig]) -> None:
        self.configs = {c.name: c for c in configs}
        self._connectors: dict[str, Connector] = {}

    @classmethod
    def from_file(cls, path: Path | None) -> SourceRegistry:
        """Empty when the file does not exist: a deployment without systems of record."""
        if path is None or not path.exists():
            return cls([])
        with path.open("rb") as fh:
            try:
                data = tomllib.load(fh)
            except tomllib.TOMLDecodeError:
                raise SourcesConfigError(f"{path.name}: not valid TOML") from None
        return cls(parse_sources(data))

    def config(self, name: str) -> SourceConfig | None:
        return self.configs.get(name)

    def connector(self, name: str) -> Connector | None:
        config = self.configs.get(name)
        if config is None:
            return None
        found = self._connectors.get(name)
        if found is None:
            found = CONNECTOR_KINDS[config.kind](config)
            self._connectors[name] = found
        return found

    async def fetch(
        self, system: str, key: str, version: str | None, *, tenant: str = "", owner: str = ""
    ) -> SourceAnswer:
        """Ask `system` about `key` (of `owner` in `tenant`, where its URL names them); an unconfigured system
        answers unavailable (`unknown_source`) at once."""
        connector = self.connector(system)
        if connector is None:
            return SourceAnswer(outcome=RevalidationOutcome.UNAVAILABLE, reason="unknown_source")
        return await connector.fetch(key, version, tenant=tenant, owner=owner)

    def vouch(self, ref: SourceRef, *, system_principal: str | None, tenant: str, owner: str) -> str | None:
        """Why a writer may not cite `ref` for `owner`'s memory, or None when it may (module docstring).

        `system_principal` is the writer's `sub` when it holds a `system` token, else None.
        Reasons: `unknown_source`, `forbidden_source` (a system principal citing a source it does not
        speak for), `source_ref_not_vouched` (the source does not scope keys to the owner),
        `unsafe_source_key`.
        """
        config = self.configs.get(ref.system)
        if config is None:
            return "unknown_source"
        if system_principal is not None:
            if not config.owned_by(system_principal):
                return "forbidden_source"
        elif not config.scoped_to_owner:
            return "source_ref_not_vouched"
        try:
            record_url(config.url, ref.key, tenant=tenant, owner=owner)
        except UnsafeKey:
            return "unsafe_source_key"
        return None

    def volatile_systems(self) -> list[str]:
        return sorted(name for name, c in self.configs.items() if c.volatile)

    async def close(self) -> None:
        for connector in self._connectors.values():
            await connector.close()
        self._connectors.clear()
