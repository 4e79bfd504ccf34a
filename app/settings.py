"""Settings: the only reader of `RAG_*` environment variables (and `.env`)."""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import secrets
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Literal, Self

import platformdirs
from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class RerankProvider(StrEnum):
    NONE = "none"
    COHERE = "cohere"  # POST {url}/v2/rerank
    JINA = "jina"  # POST {url}/v1/rerank
    TEI = "tei"  # text-embeddings-inference: POST {url}/rerank


class EmbeddingProvider(StrEnum):
    LOCAL = "local"
    OPENAI = "openai"
    AUTO = "auto"


class EmbeddingRuntime(StrEnum):
    """How the local model runs (app/embeddings/onnx_model.py, docs/BENCHMARKS.md)."""

    ONNX = "onnx"  # ONNX Runtime, fp32 graph exported from the model's own weights
    ONNX_INT8 = "onnx-int8"  # the same graph with int8 weights: other vectors, own model id
    TORCH = "torch"  # sentence-transformers on PyTorch


class RedisFailurePolicy(StrEnum):
    FAIL_OPEN = "fail_open"
    FAIL_CLOSED = "fail_closed"


class LogFormat(StrEnum):
    AUTO = "auto"  # text when stderr is a terminal, else JSON
    JSON = "json"
    TEXT = "text"


_log = logging.getLogger(__name__)

_URL_SEPARATOR = re.compile(r"\s+|\s*,\s*(?=[a-z][a-z0-9+.-]*://)")
LOCAL_HOSTS = ("127.0.0.1:*", "localhost:*", "[::1]:*", "127.0.0.1", "localhost", "[::1]")


def default_data_dir() -> Path:
    return Path(platformdirs.user_data_dir("rag-service", appauthor=False))


def default_cache_dir() -> Path:
    return Path(platformdirs.user_cache_dir("rag-service", appauthor=False))


class Settings(BaseSettings):
    """Every setting of the service; read once at start, then passed around."""

    model_config = SettingsConfigDict(
        env_prefix="RAG_", env_file=".env", extra="ignore", frozen=True
    )

    # storage
    database_url: SecretStr | None = None
    migration_database_url: SecretStr | None = None
    data_dir: Path = Field(default_factory=default_data_dir)
    # the embedded server's shared buffers; unset: a quarter of the machine's (or container's)
    # memory, 128MB to 16GB (app/db/tuning.py). Not used with RAG_DATABASE_URL.
    embedded_shared_buffers_mb: int | None = Field(default=None, ge=16)
    # The most database connections a process holds (each kept once opened). A PostgreSQL
    # runs about as many statements at once as it has cores; more connections only queue in
    # the server, and on a machine the service shares with it, each busy connection's process
    # takes turns at the cores with the service's own (docs/operations.md, "Connections").
    db_pool_size: int = Field(default=4, ge=1, le=200)
    # Every statement of a request is cancelled past this (PostgreSQL's statement_timeout);
    # 0 turns it off. Maintenance commands (migrate, index, bm25 rebuild) are not bound.
    db_statement_timeout_seconds: float = Field(default=30.0, ge=0, le=3600)
    app_role: str = Field(default="rag_app", pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    # Read replicas (docs/REPLICAS.md): streaming standbys of the primary, reached as the
    # runtime role; searches, context, similar and dedupe previews are served by a healthy one.
    database_replica_urls: Annotated[list[SecretStr], NoDecode] = Field(
        default=[], description="Comma-separated URLs of streaming replicas (runtime role)."
    )
    replica_max_lag_seconds: float = Field(
        default=5.0, gt=0, description="A replica further behind the primary is skipped."
    )
    replica_check_seconds: float = Field(
        default=1.0, gt=0, le=300, description="How often each replica's health and lag are read."
    )
    replica_connect_timeout_seconds: float = Field(
        default=2.0, gt=0, le=60, description="Connecting to a replica (and one health check)."
    )

    # request gate
    jwt_secret: SecretStr | None = None
    jwt_algorithms: Annotated[list[str], NoDecode] = ["HS256"]
    jwt_public_key_file: Path | None = None
    jwt_jwks_file: Path | None = None
    jwt_audience: str | None = None
    jwt_issuer: str | None = None
    jwt_leeway_seconds: int = Field(default=30, ge=0, le=600)
    jwt_tenant_claim: str = "tenant_id"
    jwt_groups_claim: str = Field(
        default="groups",
        min_length=1,
        description="The claim listing the caller's groups (a list of strings); each one "
        "becomes the principal group:<name> of document access lists (docs/PERMISSIONS.md).",
    )
    jwt_max_token_bytes: int = Field(default=8192, ge=256)
    tenant_cache_seconds: float = Field(default=5.0, ge=0)
    usage_flush_seconds: float = Field(default=10.0, gt=0)
    redis_url: str | None = None
    rate_limit_window_seconds: int = Field(default=60, ge=1)
    rate_limit_tiers: dict[str, int] = {"basic": 100, "pro": 1000, "enterprise": 10000}
    rate_limit_redis_failure: RedisFailurePolicy = RedisFailurePolicy.FAIL_OPEN
    # app processes sharing the Redis: while it is down each admits ceil(limit / this)
    rate_limit_instances: int = Field(default=1, ge=1, le=10_000)

    # a second stage that reorders the first stage's candidates (app/retrieval/rerank.py)
    rerank_provider: RerankProvider = RerankProvider.NONE
    rerank_url: str | None = None  # the server's base URL (cohere and jina: their public APIs)
    rerank_api_key: SecretStr | None = None
    rerank_model: str | None = None
    rerank_candidates: int = Field(default=50, ge=1, le=200)
    rerank_timeout_seconds: float = Field(default=5.0, gt=0, le=120)

    # embeddings
    embedding_provider: EmbeddingProvider = EmbeddingProvider.AUTO
    embedding_model: str | None = None
    embedding_dimensions: int = Field(default=384, ge=1, le=16000)
    embedding_query_prefix: str = ""
    embedding_passage_prefix: str = ""
    embedding_batch_size: int = Field(default=64, ge=1, le=2048)
    # Queries waiting while the local model embeds one go together into its next inference,
    # at most this many (1: one at a time); app/embeddings/batching.py
    embedding_query_batch: int = Field(default=8, ge=1, le=256)
    # The local model's runtime. onnx and torch give the same vectors (cosine >= 0.9999, same
    # model id); onnx-int8 does not and is stored under `<model id>+int8`. The ONNX graph is
    # exported from the installed weights once, into RAG_CACHE_DIR/onnx (every data dir and
    # worker of the machine shares it; safe to delete).
    embedding_runtime: EmbeddingRuntime = EmbeddingRuntime.ONNX
    cache_dir: Path = Field(default_factory=default_cache_dir)
    # ONNX Runtime threads per inference (0: the cores this process may use)
    embedding_threads: int = Field(default=0, ge=0, le=256)
    query_cache_size: int = Field(default=100, ge=0)
    openai_api_key: SecretStr | None = None
    openai_base_url: str | None = None
    openai_timeout_seconds: float = Field(default=30.0, gt=0)
    openai_max_retries: int = Field(default=5, ge=0)
    # how vectors come back: base64 float32 (~4x smaller, read with numpy) or JSON numbers, for a
    # compatible server that refuses base64 (one that answers numbers anyway needs no change)
    openai_encoding_format: Literal["base64", "float"] = "base64"

    tokenizer_file: Path | None = None  # default: the local model's tokenizer.json
    context_token_counter: Literal["tokenizer", "approx"] = "tokenizer"

    # search
    search_threshold_default: float | None = Field(default=None, ge=0.0, le=1.0)
    # None: chosen per search from the size of the index it uses (app/retrieval/planning.py)
    search_ef_search_default: int | None = Field(default=None, ge=1, le=1000)
    search_candidates: int = Field(default=40, ge=1, le=1000)
    search_rrf_k: int = Field(default=60, ge=1)
    access_flush_seconds: float = Field(default=5.0, gt=0)  # returned counts (retrieval/returns.py)
    # keyword ranking (Okapi BM25, app/retrieval/bm25.py) and hybrid fusion (fusion.py)
    search_bm25_k1: float = Field(default=1.2, ge=0.0, le=10.0)
    search_bm25_b: float = Field(default=0.4, ge=0.0, le=1.0)
    search_keyword_max_terms: int = Field(default=32, ge=1, le=256)
    search_fusion: Literal["rrf", "weighted"] = "weighted"
    search_fusion_vector_weight: float = Field(default=0.6, ge=0.0, le=1.0)
    dedicated_index_min_chunks: int = Field(default=5_000, ge=1)  # `rag index`
    # the service runs `rag index` itself this often when it has the owner's URL; 0: never
    auto_index_seconds: float = Field(default=300.0, ge=0)
    # the most maintenance_work_mem a dedicated index's build gets (it gets what its graph
    # needs: ~2.3 KB a chunk at 384 dimensions); a larger graph is finished on disk, slower
    index_build_memory_max_mb: int = Field(default=2048, ge=64)
    query_max_chars: int = Field(default=10_000, ge=1)

    # MCP at /mcp (transport security against DNS rebinding: Host and Origin allowlists;
    # "host:*" allows any port, "*" alone turns the check off, e.g. behind a proxy that sets Host)
    mcp_allowed_hosts: Annotated[list[str], NoDecode] = list(LOCAL_HOSTS)
    mcp_allowed_origins: Annotated[list[str], NoDecode] = [f"http://{h}" for h in LOCAL_HOSTS]

    # ingest
    chunk_tokens: int = Field(default=300, ge=32, le=8192)
    chunk_overlap_tokens: int = Field(default=50, ge=0)
    upload_max_bytes: int = Field(default=25 * 1024 * 1024, ge=1024)
    http_max_header_bytes: int = Field(default=64 * 1024, ge=4096)  # request line + headers
    # How long a request may take to arrive (app/api/http_protocol.py); 408 past it. The head:
    # from the connection's start, or from the first byte of the next request on it.
    http_head_timeout_seconds: float = Field(default=10.0, gt=0, le=3600)
    # The body: from the end of its head, plus a second for every so many bytes received.
    http_body_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    http_body_min_bytes_per_second: int = Field(default=16 * 1024, ge=0)
    http_keepalive_seconds: float = Field(default=5.0, gt=0, le=3600)  # idle between requests
    batch_max_documents: int = Field(default=100, ge=1)
    # chunks one synchronous ingest request may make (app/ingest/allowance.py): past it, a job
    sync_ingest_max_chunks: int = Field(default=1_000, ge=1)
    # what one document may cost to parse (app/ingest/parsing/limits.py)
    parse_seconds: float = Field(default=5.0, gt=0)  # files: budget = this + per MB sent
    parse_seconds_per_mb: float = Field(default=10.0, ge=0)
    parse_max_pages: int = Field(default=5_000, ge=1)
    parse_max_chars: int = Field(default=10_000_000, ge=1)
    parse_max_inflated_bytes: int = Field(default=32 * 1024 * 1024, ge=1024)  # per stream/member
    parse_max_unzipped_bytes: int = Field(default=256 * 1024 * 1024, ge=1024)  # a whole ZIP
    parse_max_rows: int = Field(default=200_000, ge=1)  # a workbook's rows, empty ones included
    parse_max_xml_depth: int = Field(default=128, ge=8, le=10_000)
    parse_max_xml_elements: int = Field(default=1_000_000, ge=1_000)  # one member read as a tree
    parse_workers: int = Field(default=1, ge=1, le=64)  # processes reading PDFs, Office files
    # address space of each parse worker, MiB (RLIMIT_AS; 0: unbounded): past it a 422
    parse_max_memory_mb: int = Field(default=768, ge=0)
    parse_inline_bytes: int = Field(default=32 * 1024, ge=0)  # larger markdown/HTML: the workers
    # PDF pages without a text layer read by OCR (app/ingest/parsing/ocr.py): RAG_OCR=off stops it
    ocr: bool = True
    ocr_languages: str = Field(default="eng", pattern=r"^[A-Za-z_]+(\+[A-Za-z_]+)*$")
    ocr_max_pages: int = Field(default=100, ge=1)  # scanned pages of one PDF (413 past it)
    ocr_seconds_per_page: float = Field(default=20.0, gt=0)

    # ingestion jobs (docs/JOBS.md)
    job_workers: int = Field(default=1, ge=0, le=64)  # in-process workers of `rag serve`
    job_max_request_bytes: int = Field(default=256 * 1024 * 1024, ge=1024)
    job_max_documents: int = Field(default=10_000, ge=1)
    job_max_queued_jobs: int = Field(default=100, ge=1)  # per tenant
    job_max_queued_bytes: int = Field(default=1024 * 1024 * 1024, ge=1024)  # per tenant
    job_turn_documents: int = Field(default=8, ge=1)  # then the job yields its worker
    job_heartbeat_seconds: float = Field(default=10.0, gt=0)
    job_stalled_seconds: float = Field(default=30.0, gt=0)  # no heartbeat: the job runs again

    # job callbacks (docs/JOBS.md, "Callbacks"): signed as Standard Webhooks say, with this
    # `whsec_...` secret; without it a job's `callback_url` is refused
    webhook_secret: SecretStr | None = None
    # hosts a callback may reach over http, or at a private, loopback or link-local address
    webhook_allowed_hosts: Annotated[list[str], NoDecode] = []
    webhook_timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    # the first retry's delay, doubled after each failure up to the longest delay; retries go
    # on until the window (from the job's end) has passed
    webhook_retry_base_seconds: float = Field(default=5.0, gt=0)
    webhook_retry_max_delay_seconds: float = Field(default=3600.0, gt=0)
    webhook_retry_window_seconds: float = Field(default=24 * 3600.0, gt=0)

    # operations (docs/OBSERVABILITY.md)
    log_format: LogFormat = LogFormat.AUTO  # `rag serve`'s log lines: JSON, or text on a terminal
    metrics_tenant_label: bool = False  # a `tenant` label on per-tenant metrics (cardinality)
    # `rag serve` on Ctrl-C / SIGTERM: requests in flight get this long to finish (then they
    # are cancelled); a second Ctrl-C stops at once
    shutdown_grace_seconds: int = Field(default=30, ge=0, le=3600)

    @field_validator("jwt_algorithms", mode="before")
    @classmethod
    def _split_algorithms(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.replace(",", " ").split() if part.strip()]
        return value

    @field_validator(
        "mcp_allowed_hosts", "mcp_allowed_origins", "webhook_allowed_hosts", mode="before"
    )
    @classmethod
    def _split_lists(cls, value: object) -> object:
        """Comma- or space-separated in the environment (a JSON list works too)."""
        if isinstance(value, str):
            if value.strip().startswith("["):
                return json.loads(value)
            return [part.strip() for part in value.replace(",", " ").split() if part.strip()]
        return value

    @field_validator("database_replica_urls", mode="before")
    @classmethod
    def _split_urls(cls, value: object) -> object:
        """Separated by whitespace or by commas before a scheme, so that a multi-host URL
        (`postgresql://u@h1,h2/db`) stays whole; a JSON list works too."""
        if isinstance(value, str):
            if value.strip().startswith("["):
                return json.loads(value)
            return [part for part in _URL_SEPARATOR.split(value.strip()) if part]
        return value

    @field_validator("webhook_secret")
    @classmethod
    def _standard_webhooks_secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            webhook_key(value.get_secret_value())  # ValueError saying what is wrong
        return value

    @field_validator("jwt_algorithms")
    @classmethod
    def _known_algorithms(cls, value: list[str]) -> list[str]:
        allowed = {"HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "ES256", "ES384", "ES512"}
        if not value or not set(value) <= allowed:
            raise ValueError(f"must be a list drawn from {sorted(allowed)}, got {value}")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.chunk_overlap_tokens >= self.chunk_tokens:
            raise ValueError("RAG_CHUNK_OVERLAP_TOKENS must be smaller than RAG_CHUNK_TOKENS")
        if "basic" not in self.rate_limit_tiers:
            raise ValueError("RAG_RATE_LIMIT_TIERS must define the 'basic' tier")
        return self


def webhook_key(secret: str) -> bytes:
    """The HMAC key of a Standard Webhooks secret: the base64 after `whsec_`."""
    if not secret.startswith("whsec_"):
        raise ValueError("must start with whsec_ (a Standard Webhooks secret)")
    try:
        key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    except binascii.Error:
        raise ValueError("the part after whsec_ must be base64") from None
    if not 24 <= len(key) <= 64:
        raise ValueError(f"must hold 24 to 64 bytes after whsec_, not {len(key)}")
    return key


def with_dev_jwt_secret(settings: Settings) -> Settings:
    """In embedded mode with no JWT key configured, use a random secret kept in RAG_DATA_DIR.

    `rag serve` and `rag token` then agree without any setup; a configured key always wins.
    """
    path = dev_jwt_secret_file(settings)
    if path is None:
        return settings
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(48))
        _log.warning(
            "created a new token secret in %s: only a server with this RAG_DATA_DIR accepts "
            "tokens signed with it",
            path,
        )
    return settings.model_copy(update={"jwt_secret": SecretStr(path.read_text().strip())})


def dev_jwt_secret_file(settings: Settings) -> Path | None:
    """The embedded mode's secret file, or None when a key is configured (it always wins)."""
    has_key = settings.jwt_secret or settings.jwt_public_key_file or settings.jwt_jwks_file
    if has_key or settings.database_url is not None:
        return None
    return settings.data_dir / "jwt-secret"
