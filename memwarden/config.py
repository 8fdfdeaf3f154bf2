"""Every knob memwarden has, in one pydantic-settings class (env prefix `MEMWARDEN_`).

Two profiles share the same code: `embedded` (SQLite, Qdrant Edge, in-process cache, secrets
created in the data dir on first use) and `production` (PostgreSQL, a Qdrant server, Redis,
secrets from the environment). The profile only picks defaults; any field can be set explicitly.
"""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Callable
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from memwarden.audit_signing import CheckpointSigner, CheckpointVerifier
from memwarden.file_modes import check_key_file, private_dir
from memwarden.jwks import JwksKeys, TokenVerifier
from memwarden.keys import Purpose, derive_key, weak_secret_reason
from memwarden.policy.gate import GatePolicy
from memwarden.policy.ranking import DEFAULT_PARAMS as DEFAULT_RANKING
from memwarden.policy.ranking import RankingParams
from memwarden.policy.retention import DEFAULT_CLASSES, RetentionClass


class Profile(StrEnum):
    EMBEDDED = "embedded"
    PRODUCTION = "production"


class VectorBackend(StrEnum):
    EDGE = "edge"
    QDRANT = "qdrant"


class CacheBackend(StrEnum):
    MEMORY = "memory"
    REDIS = "redis"


SECRET_FIELDS = frozenset(
    {
        "database_url",
        "qdrant_api_key",
        "redis_url",
        "auth_secret",
        "codec_key",
        "codec_old_keys",
        "audit_signing_key",
        "replica_urls",
    }
)
"""Settings whose values are credentials (or embed them): a Secret / env file, never a ConfigMap or a log."""


class ExtractorKind(StrEnum):
    RULES = "rules"
    LLM = "llm"


class OtelExporter(StrEnum):
    NONE = "none"
    OTLP = "otlp"


class Settings(BaseSettings):
    """Configuration for the API, the worker and `memwarden up`."""

    model_config = SettingsConfigDict(env_prefix="MEMWARDEN_", extra="ignore")

    profile: Profile = Field(
        default=Profile.EMBEDDED,
        description="embedded (one machine, secrets in the data dir) or production (every service external).",
    )
    data_dir: Path = Field(
        default=Path(".memwarden"), description="Embedded data: SQLite, Edge shard, secrets, Temporal db."
    )

    database_url: str | None = Field(default=None, description="SQLAlchemy async URL; default SQLite in the data dir.")
    vector_backend: VectorBackend | None = Field(default=None, description="edge (embedded) or qdrant (production).")
    qdrant_url: str | None = Field(
        default=None, description="Qdrant server URL for the qdrant backend (or, in tests, MEMWARDEN_QDRANT_LOCATION)."
    )
    qdrant_api_key: str | None = Field(default=None, description="API key sent to the Qdrant server (a secret).")
    qdrant_location: str | None = Field(
        default=None, description="qdrant-client local mode (':memory:' or a path); tests only."
    )
    qdrant_collection: str = Field(default="memories", description="One collection for every tenant (is_tenant).")
    qdrant_shard_number: int | None = Field(
        default=None, gt=0, description="Shards of the collection when memwarden creates it (cluster)."
    )
    qdrant_replication_factor: int | None = Field(
        default=None, gt=0, description="Copies of each shard when memwarden creates the collection (cluster)."
    )
    edge_flush_delay_seconds: float = Field(
        default=5.0,
        gt=0,
        le=300,
        description="Qdrant Edge group flush: upserts reach disk within this (a flush holds the GIL for its "
        "fsyncs; a crash loses at most this much of the index, and worker start re-indexes it from the store).",
    )
    cache_backend: CacheBackend | None = Field(default=None, description="memory (embedded) or redis (production).")
    redis_url: str = Field(default="redis://127.0.0.1:6379/0", description="Redis URL for the redis cache backend.")
    redis_namespace: str = Field(
        default="mw",
        min_length=1,
        pattern=r"^[^:]+$",
        description="Prefix of every Redis key (no ':'), so deployments can share one Redis.",
    )
    cache_ttl_seconds: int = Field(default=300, gt=0, description="Lifetime of a cached search answer.")
    replica_urls: list[str] = Field(
        default_factory=list,
        description="SQL URLs that receive copies of committed memories (they carry the replicas' credentials).",
    )

    temporal_address: str = Field(default="127.0.0.1:7233", description="Temporal frontend host:port.")
    temporal_namespace: str = Field(default="default", description="Temporal namespace (set its retention there).")
    temporal_task_queue: str = Field(default="memwarden", description="Task queue the API starts and workers poll.")
    temporal_ui_port: int = Field(default=8233, description="Dev server Web UI port (`memwarden up` only).")
    temporal_tls: bool = Field(default=False, description="TLS to the Temporal frontend (system CA unless a CA file).")
    temporal_tls_ca_file: Path | None = Field(default=None, description="PEM CA bundle for the Temporal frontend.")
    temporal_tls_cert_file: Path | None = Field(default=None, description="PEM client certificate (mTLS).")
    temporal_tls_key_file: Path | None = Field(default=None, description="PEM client key (mTLS; a secret).")
    temporal_tls_server_name: str | None = Field(default=None, description="TLS server name, if not the host.")
    temporal_ui_base_url: str | None = Field(
        default=None, description="Temporal Web UI, for links to workflow histories; default 127.0.0.1:<ui port>."
    )

    api_host: str = Field(default="127.0.0.1", description="API listen address (`memwarden api`: 0.0.0.0).")
    api_port: int = Field(default=8080, description="API listen port.")
    worker_health_port: int | None = Field(
        default=None,
        description="Port for the worker's /healthz and /readyz (probes); unset: no listener.",
    )
    worker_health_host: str = Field(default="0.0.0.0", description="Listen address of the worker's health port.")
    readiness_timeout_seconds: float = Field(
        default=5.0,
        gt=0,
        le=60,
        description="How long the API's /readyz waits for each check (Temporal, the store, a worker's index) "
        "before it reports that one down.",
    )
    worker_shutdown_grace_seconds: float = Field(
        default=20.0,
        ge=0,
        description="On SIGTERM, how long in-flight activities may finish before they are cancelled (and retried).",
    )

    auth_secret: str | None = Field(
        default=None,
        description="The service's secret (at least 32 random bytes): per-purpose keys for local tokens, "
        "pseudonyms, subject handles and CSRF are derived from it; embedded: a file in the data dir.",
    )
    auth_issuer: str = Field(default="memwarden", description="Expected `iss` of every bearer token.")
    auth_audience: str = Field(
        default="memwarden", min_length=1, description="Required `aud` of every bearer token (the service it is for)."
    )
    token_ttl_seconds: int = Field(default=3600, gt=0, description="Lifetime of tokens `memwarden token` mints.")
    token_max_ttl_seconds: int = Field(
        default=24 * 3600,
        gt=0,
        description="Longest lifetime (exp - iat) a token may have: longer ones are refused, and never minted.",
    )
    auth_leeway_seconds: int = Field(
        default=30, ge=0, le=300, description="Clock skew allowed when checking a token's exp, iat and nbf."
    )
    auth_jwks_url: str | None = Field(
        default=None,
        description="An issuer's JWKS: RS256/ES256 tokens whose `kid` it publishes are accepted (keys rotate by kid).",
    )
    auth_jwks_issuer: str | None = Field(
        default=None, description="Expected `iss` of the JWKS issuer's tokens; default MEMWARDEN_AUTH_ISSUER."
    )
    auth_jwks_cache_seconds: float = Field(
        default=300.0, gt=0, description="How long a fetched JWKS is used before it is fetched again."
    )
    auth_jwks_refetch_seconds: float = Field(
        default=10.0,
        ge=0,
        description="A token naming an unknown kid refetches the JWKS at most this often (rotation, not a flood).",
    )
    auth_local_tokens: bool | None = Field(
        default=None,
        description="Accept HS256 tokens minted with the service's secret; default: yes, unless production has a JWKS.",
    )
    codec_key: str | None = Field(
        default=None, description="base64 AES-256 key for Temporal payloads; embedded: a file in the data dir."
    )
    codec_old_keys: list[str] = Field(
        default_factory=list,
        description="Retired base64 codec keys (JSON list), kept to decode history written before a rotation.",
    )

    codec_accept_plaintext: bool = Field(
        default=False,
        description="Let workers read unencrypted payloads (history from before the codec); off, a plaintext "
        "input or update sent straight to Temporal is refused.",
    )

    max_content_chars: int = Field(default=4096, gt=0, description="Longest memory content accepted.")
    max_request_bytes: int = Field(default=64 * 1024, gt=0, description="Largest request body accepted.")
    default_k: int = Field(default=5, gt=0, description="Search results when the request gives no k.")
    max_k: int = Field(default=50, gt=0, description="Largest k a search may ask for.")
    max_page_size: int = Field(default=200, gt=0, description="Largest `limit` of a listing.")
    default_page_size: int = Field(default=50, gt=0, description="`limit` of a listing that gives none.")
    max_query_chars: int = Field(default=2048, gt=0, description="Longest search query accepted.")
    import_max_lines: int = Field(default=100_000, gt=0, description="Most lines one bulk import may have.")
    import_line_max_bytes: int = Field(
        default=32 * 1024,
        gt=0,
        description="Longest line of a bulk import (bytes); a longer one is reported `line_too_large`, unread.",
    )
    import_batch_size: int = Field(
        default=200,
        ge=1,
        le=1000,
        description="Lines one ImportWorkflow batch screens, embeds and commits together (one transaction).",
    )
    import_heartbeat_seconds: int = Field(
        default=15,
        ge=1,
        description="A batch whose worker stops heartbeating for this long is retried on another worker.",
    )

    audit_signing_key: str | None = Field(
        default=None,
        description="base64 Ed25519 seed that signs audit checkpoints; embedded: a file in the data dir.",
    )
    audit_verify_keys: list[str] = Field(
        default_factory=list,
        description="base64 Ed25519 public keys of earlier signing keys, still trusted when verifying.",
    )
    audit_checkpoint_every: int = Field(default=256, gt=0, description="Sign the chain head every N events.")
    audit_checkpoint_seconds: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        description="Also sign the head this often (the worker's timer), and publish every signed head.",
    )
    audit_heads_file: Path | None = Field(
        default=None,
        description="Append-only file signed audit heads are published to; default <data_dir>/audit-heads.jsonl.",
    )
    audit_heads_url: str | None = Field(
        default=None,
        description="Also POST each signed head here (GET answers them back for verification): outside the database.",
    )

    otel_exporter: OtelExporter = Field(
        default=OtelExporter.NONE, description="Where spans go: none (default) or otlp (OTLP over HTTP)."
    )
    otel_endpoint: str | None = Field(
        default=None, description="OTLP traces endpoint; default the exporter's own (OTEL_EXPORTER_OTLP_* env)."
    )
    otel_service_name: str = Field(default="memwarden", description="service.name on exported spans and metrics.")
    metrics_enabled: bool = Field(default=True, description="Serve Prometheus metrics at GET /metrics.")
    me_cookie_secure: bool | None = Field(
        default=None,
        description="Mark the /me page's cookies Secure; default: always in production, else when over https.",
    )
    trusted_proxies: list[str] = Field(
        default_factory=lambda: ["127.0.0.1", "::1"],
        description="Peers whose X-Forwarded-For/-Proto the API believes (uvicorn forwarded_allow_ips); '*': all.",
    )
    mcp_enabled: bool | None = Field(
        default=None,
        description="Serve memwarden's MCP server at /mcp (streamable HTTP, the API's bearer tokens); "
        "default: when the mcp extra is installed. On without the extra, the API refuses to start.",
    )
    mcp_resource_url: str | None = Field(
        default=None,
        description="The public URL of /mcp, named in its protected-resource metadata (set it behind a proxy); "
        "default: http on MEMWARDEN_API_HOST (127.0.0.1 for 0.0.0.0) and MEMWARDEN_API_PORT, path /mcp.",
    )
    mcp_authorization_server: str | None = Field(
        default=None,
        description="The authorization server the /mcp metadata names for tokens; default "
        "MEMWARDEN_AUTH_JWKS_ISSUER when it is a URL, else the origin of the /mcp URL.",
    )
    codec_cors_origins: list[str] = Field(
        default_factory=lambda: ["http://127.0.0.1:8233", "http://localhost:8233"],
        description="Origins (the Temporal Web UI) allowed to call /codec/* from the browser.",
    )
    rank_dense_weight: float = Field(
        default=DEFAULT_RANKING.dense_weight, ge=0.0, description="Search: weight of the dense cosine in fusion."
    )
    rank_sparse_weight: float = Field(
        default=DEFAULT_RANKING.sparse_weight,
        ge=0.0,
        description="Search: weight of the BM25 score (divided by the best candidate's) in fusion.",
    )
    rank_min_cosine: float = Field(
        default=DEFAULT_RANKING.min_cosine,
        ge=-1.0,
        le=1.0,
        description="Search relevance floor: a hit passes with at least this cosine (or the BM25 floor).",
    )
    rank_min_bm25: float = Field(
        default=DEFAULT_RANKING.min_bm25,
        ge=0.0,
        description="Search relevance floor: a hit passes with at least this raw BM25 score (or the cosine floor).",
    )
    rank_recency_weight: float = Field(
        default=DEFAULT_RANKING.recency_weight,
        ge=0.0,
        le=1.0,
        description="Search: the largest share of a score that age can take away.",
    )
    rank_recency_half_life_days: float = Field(
        default=DEFAULT_RANKING.recency_half_life_days,
        gt=0.0,
        description="Search: days after which recency counts half (from creation or last confirmation).",
    )
    rank_importance_weight: float = Field(
        default=DEFAULT_RANKING.importance_weight,
        ge=0.0,
        le=1.0,
        description="Search: the largest share of a score that low importance can take away.",
    )
    rank_neighbour_weight: float = Field(
        default=DEFAULT_RANKING.neighbour_weight,
        ge=0.0,
        description="Search: share of each relevant neighbouring turn's score (same session) a memory gains; 0 is off.",
    )
    rank_neighbour_window: int = Field(
        default=DEFAULT_RANKING.neighbour_window,
        ge=0,
        le=10,
        description="Search: how many turns either side count as neighbours (provenance session and turn).",
    )
    rank_previous_turn_factor: float = Field(
        default=DEFAULT_RANKING.previous_turn_factor,
        ge=0.0,
        description="Search: how much more an earlier neighbouring turn counts than a later one.",
    )
    rank_session_weight: float = Field(
        default=DEFAULT_RANKING.session_weight,
        ge=0.0,
        description="Search: share of the best score in a memory's conversation session it gains; 0 is off.",
    )
    rank_speaker_weight: float = Field(
        default=DEFAULT_RANKING.speaker_weight,
        ge=0.0,
        description="Search: how much higher a memory ranks when the query names its provenance speaker; 0 is off.",
    )
    search_candidates: int = Field(
        default=100,
        ge=1,
        le=1000,
        description="Search: candidates each retriever (dense, BM25) offers to ranking, at least 4 x k.",
    )

    extractor: ExtractorKind = Field(
        default=ExtractorKind.RULES,
        description="Conversations: which extractor proposes candidates: rules (offline) or llm (EXTRACT_LLM_*).",
    )
    extract_llm_base_url: str | None = Field(
        default=None,
        description="Conversations: an OpenAI-compatible API's base URL (its /chat/completions is called).",
    )
    extract_llm_model: str = Field(default="gpt-4o-mini", description="Conversations: the chat model to ask.")
    extract_llm_api_key: str | None = Field(
        default=None, description="Conversations: the endpoint's bearer key (never logged)."
    )
    extract_llm_timeout_seconds: float = Field(
        default=20.0, gt=0, le=300, description="Conversations: how long one chat-completions call may take."
    )
    extract_llm_retries: int = Field(
        default=2, ge=0, le=10, description="Conversations: retries of a failed or malformed completion."
    )
    guidance_repeat_sessions: int = Field(
        default=3,
        ge=2,
        le=50,
        description="Conversations: sessions repeating task guidance before it is proposed as a preference.",
    )
    conversation_concurrency: int = Field(
        default=1,
        ge=1,
        le=16,
        description="Conversations: candidates decided at once (1: in message order; more: never two of a slot).",
    )
    max_conversation_messages: int = Field(
        default=200, ge=1, le=5000, description="Conversations: most messages one request may hand over."
    )

    workflow_timeout_seconds: float = Field(
        default=30.0, gt=0, description="How long the API waits for a workflow's answer."
    )
    retention_sweep_seconds: int = Field(
        default=300, gt=0, description="How often expired memories are swept through Forget (a Temporal Schedule)."
    )
    retention_classes: dict[str, RetentionClass] = Field(
        default_factory=lambda: dict(DEFAULT_CLASSES),
        description=(
            "Retention classes the expiry sweep honours (JSON): {name: {max_age_days?, hold?}}; "
            "hold keeps a class from expiring."
        ),
    )

    sources_file: Path | None = Field(
        default=None, description="Systems of record (sources.toml); default <data_dir>/sources.toml, absent: none."
    )
    revalidation_sweep_seconds: int = Field(
        default=900, gt=0, description="How often volatile source-backed memories are re-checked (a Temporal Schedule)."
    )
    revalidation_batch: int = Field(
        default=200, gt=0, le=5000, description="Most memories one periodic revalidation sweep re-checks."
    )
    revalidation_background_attempts: int = Field(
        default=6,
        gt=0,
        le=50,
        description="Checks a background revalidation makes while the source stays unavailable (1 s, doubling).",
    )
    invalidate_coalesce_seconds: float = Field(
        default=0.5,
        ge=0,
        le=60,
        description="Change events for one source record within this window are revalidated as one.",
    )
    invalidate_quiet_seconds: float = Field(
        default=5.0, ge=0, le=3600, description="An InvalidateWorkflow ends after this long without a new event."
    )

    importance_threshold: float = Field(
        default=0.3, ge=0.0, le=1.0, description="Candidates scored below this are rejected (low_importance)."
    )
    confirmation_window_seconds: int = Field(
        default=24 * 3600, gt=0, description="How long a PENDING write waits for confirmation before rejection."
    )

    def ranking(self) -> RankingParams:
        """Retrieve's ranking knobs (memwarden.policy.ranking); defaults tuned on LoCoMo (docs/benchmarks.md)."""
        return RankingParams(
            dense_weight=self.rank_dense_weight,
            sparse_weight=self.rank_sparse_weight,
            min_cosine=self.rank_min_cosine,
            min_bm25=self.rank_min_bm25,
            recency_weight=self.rank_recency_weight,
            recency_half_life_days=self.rank_recency_half_life_days,
            importance_weight=self.rank_importance_weight,
            neighbour_weight=self.rank_neighbour_weight,
            neighbour_window=self.rank_neighbour_window,
            previous_turn_factor=self.rank_previous_turn_factor,
            session_weight=self.rank_session_weight,
            speaker_weight=self.rank_speaker_weight,
        )

    @model_validator(mode="after")
    def _profile_defaults(self) -> Settings:
        embedded = self.profile is Profile.EMBEDDED
        if self.vector_backend is None:
            self.vector_backend = VectorBackend.EDGE if embedded else VectorBackend.QDRANT
        if self.cache_backend is None:
            self.cache_backend = CacheBackend.MEMORY if embedded else CacheBackend.REDIS
        if self.database_url is None:
            if not embedded:
                raise ValueError("MEMWARDEN_DATABASE_URL is required in the production profile")
            self.database_url = f"sqlite+aiosqlite:///{(self.data_dir / 'memwarden.db').resolve()}"
        if self.token_ttl_seconds > self.token_max_ttl_seconds:
            raise ValueError("MEMWARDEN_TOKEN_TTL_SECONDS exceeds MEMWARDEN_TOKEN_MAX_TTL_SECONDS")
        if self.auth_local_tokens is None:
            self.auth_local_tokens = embedded or self.auth_jwks_url is None
        if self.me_cookie_secure is None and not embedded:
            self.me_cookie_secure = True  # production is served over TLS (at the proxy, if not here)
        if not embedded:
            if not self.auth_secret:
                raise ValueError("MEMWARDEN_AUTH_SECRET is required in the production profile")
            weak = weak_secret_reason(self.auth_secret)
            if weak is not None:
                raise ValueError(f"MEMWARDEN_AUTH_SECRET {weak}")
            if not self.codec_key:
                raise ValueError("MEMWARDEN_CODEC_KEY is required in the production profile")
            if not self.audit_signing_key:
                raise ValueError("MEMWARDEN_AUDIT_SIGNING_KEY is required in the production profile")
            if self.vector_backend is VectorBackend.QDRANT and not (self.qdrant_url or self.qdrant_location):
                raise ValueError("MEMWARDEN_QDRANT_URL is required for the qdrant backend")
        return self

    @cached_property
    def gate_policy(self) -> GatePolicy:
        """The write gate's knobs, handed to every RememberWorkflow as input (workflows never read config)."""
        return GatePolicy(
            importance_threshold=self.importance_threshold,
            confirmation_window_seconds=self.confirmation_window_seconds,
        )

    @property
    def temporal_ui_url(self) -> str:
        return self.temporal_ui_base_url or f"http://127.0.0.1:{self.temporal_ui_port}"

    @property
    def sources_path(self) -> Path:
        return self.sources_file or self.data_dir / "sources.toml"

    @property
    def audit_heads_path(self) -> Path:
        return self.audit_heads_file or self.data_dir / "audit-heads.jsonl"

    @property
    def edge_path(self) -> Path:
        return self.data_dir / "index"

    @property
    def temporal_db_path(self) -> Path:
        return self.data_dir / "temporal.db"

    @cached_property
    def auth_secret_value(self) -> str:
        """The signing secret; embedded profile creates it once in the data dir (mode 0600)."""
        if self.auth_secret:
            return self.auth_secret
        return _secret_file(self.data_dir / "auth.secret", lambda: secrets.token_urlsafe(48))

    def key_for(self, purpose: Purpose) -> bytes:
        """The key for one purpose, derived from the secret (memwarden.keys): never the secret itself."""
        return derive_key(self.auth_secret_value, purpose)

    @property
    def mcp_resource(self) -> str:
        """The URL MCP clients reach /mcp at (the resource of its protected-resource metadata)."""
        if self.mcp_resource_url:
            return self.mcp_resource_url.rstrip("/")
        host = "127.0.0.1" if self.api_host in ("0.0.0.0", "::", "") else self.api_host
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.api_port}/mcp"

    @property
    def mcp_authorization_server_url(self) -> str:
        """Where the /mcp metadata sends clients for a token (an identity provider's issuer, or memwarden)."""
        if self.mcp_authorization_server:
            return self.mcp_authorization_server
        issuer = self.auth_jwks_issuer or ""
        if issuer.startswith(("https://", "http://")):
            return issuer
        parsed = urlsplit(self.mcp_resource)
        return f"{parsed.scheme}://{parsed.netloc}"

    @cached_property
    def token_verifier(self) -> TokenVerifier:
        """Verifies every bearer token: local HS256 ones and, with MEMWARDEN_AUTH_JWKS_URL, the issuer's."""
        return TokenVerifier(
            secret=self.auth_secret_value,
            issuer=self.auth_issuer,
            audience=self.auth_audience,
            max_ttl_seconds=self.token_max_ttl_seconds,
            leeway_seconds=self.auth_leeway_seconds,
            jwks=JwksKeys(
                self.auth_jwks_url,
                max_age=self.auth_jwks_cache_seconds,
                refetch_interval=self.auth_jwks_refetch_seconds,
            )
            if self.auth_jwks_url
            else None,
            accept_local=bool(self.auth_local_tokens),
            jwks_issuer=self.auth_jwks_issuer,
        )

    @cached_property
    def codec_key_bytes(self) -> bytes:
        """32-byte AES key for the payload codec; embedded profile creates it in the data dir."""
        raw = self.codec_key or _secret_file(
            self.data_dir / "codec.key", lambda: base64.b64encode(secrets.token_bytes(32)).decode()
        )
        return _codec_key(raw)

    @cached_property
    def codec_old_key_bytes(self) -> list[bytes]:
        """Retired 32-byte codec keys, for decoding history sealed before a rotation."""
        return [_codec_key(raw) for raw in self.codec_old_keys]

    @cached_property
    def audit_signer(self) -> CheckpointSigner:
        """Signs audit checkpoints; embedded profile creates its key once in the data dir (mode 0600).

        Production takes it from MEMWARDEN_AUDIT_SIGNING_KEY: keep it where database writers cannot
        read it, or they could re-sign a rebuilt chain.
        """
        seed = self.audit_signing_key or _secret_file(
            self.data_dir / "audit-signing.key", CheckpointSigner.generate_base64
        )
        return CheckpointSigner.from_base64(seed)

    @cached_property
    def audit_verifier(self) -> CheckpointVerifier:
        """The current signing key's public half plus every configured earlier one."""
        verifier = CheckpointVerifier.from_base64([self.audit_signer.public_base64(), *self.audit_verify_keys])
        return verifier


def _codec_key(raw: str) -> bytes:
    try:
        key = base64.b64decode(raw, validate=True)
    except ValueError:
        raise ValueError("codec key must be base64") from None
    if len(key) != 32:
        raise ValueError("codec key must be 32 bytes, base64-encoded")
    return key


def _secret_file(path: Path, make: Callable[[], str]) -> str:
    """Read a secret, or create it exactly once (O_EXCL: a racing process reads the winner's).

    Created 0600 in a 0700 dir; an existing one that group or others may read is refused
    (`memwarden.file_modes.check_key_file` says how to fix it)."""
    if path.exists():
        check_key_file(path)
        return path.read_text().strip()
    private_dir(path.parent)
    value = make()
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(value)
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    return path.read_text().strip()


def load_settings(**overrides: object) -> Settings:
    return Settings(**overrides)  # type: ignore[arg-type]
