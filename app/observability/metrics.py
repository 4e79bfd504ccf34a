"""Every metric of the service, defined once (docs/OBSERVABILITY.md lists them).

The domain packages record into these (retrieval, ingest, embeddings, ratelimit, db, gate);
the HTTP edge records the request counters (app/api/observe.py). Labels are bounded: route
templates, never raw paths; search modes; a tenant id only when RAG_METRICS_TENANT_LABEL
turns it on (`tenant_label`), else the empty value, which Prometheus treats as no label.

Under `rag serve --workers N` prometheus_client's multiprocess mode is on (exposition.py):
values live in files under PROMETHEUS_MULTIPROC_DIR and a scrape of any worker sums them.
Gauges say how they combine across processes (`livesum`: the live processes' sum).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from prometheus_client import Counter, Gauge, Histogram

# Seconds. Requests: a cached search answers in milliseconds, a batch ingest in tens of seconds.
REQUEST_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
STAGE_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
EMBED_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
WAIT_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

# HTTP (app/api/observe.py)
HTTP_REQUESTS = Counter(
    "rag_http_requests",
    "HTTP requests answered, by method, route template, status (and tenant when enabled).",
    ["method", "route", "status", "tenant"],
)
HTTP_DURATION = Histogram(
    "rag_http_request_duration_seconds",
    "Time from a request's arrival to the end of its reply, by method and route template.",
    ["method", "route"],
    buckets=REQUEST_BUCKETS,
)
HTTP_IN_PROGRESS = Gauge(
    "rag_http_requests_in_progress",
    "HTTP requests being served now.",
    multiprocess_mode="livesum",
)

# search (app/retrieval/search.py)
SEARCH_STAGE = Histogram(
    "rag_search_stage_seconds",
    "Search time by mode and stage: embed (the query's vector) and database (every statement).",
    ["mode", "stage"],
    buckets=STAGE_BUCKETS,
)

# embeddings (app/embeddings/cache.py: every provider is behind the query cache)
RERANKS = Counter(
    "rag_rerank",
    "Second-stage reranking, by outcome: reranked, skipped (the reranker failed, timed out, "
    "was rate limited or answered what could not be used: the first stage's order was used) "
    "or refused (a 4xx other than 429, most often its key).",
    ["outcome"],
)
RERANK_REFUSING = Gauge(
    "rag_rerank_refusing",
    "1 while the reranker's last answer was a refusal (a 4xx other than 429: its key or model), "
    "until a call succeeds; searches go on in the first stage's order meanwhile.",
    multiprocess_mode="livemax",
)
QUERY_CACHE = Counter(
    "rag_query_embedding_cache",
    "Query embeddings looked up in the LRU cache, by result (hit or miss).",
    ["result"],
)
EMBEDDING_CALLS = Counter(
    "rag_embedding_calls",
    "Calls to the embedding provider, by kind (query or documents) and outcome (ok or error).",
    ["kind", "outcome"],
)
EMBEDDING_SECONDS = Histogram(
    "rag_embedding_call_seconds",
    "Duration of calls to the embedding provider, by kind (query or documents).",
    ["kind"],
    buckets=EMBED_BUCKETS,
)
EMBEDDED_TEXTS = Counter(
    "rag_embedded_texts", "Texts sent to the embedding provider, by kind.", ["kind"]
)

# rate limit (app/gate.py, app/ratelimit/fallback.py)
RATE_LIMIT_DECISIONS = Counter(
    "rag_ratelimit_decisions",
    "Rate-limit decisions, allowed or limited (and by tenant when enabled).",
    ["decision", "tenant"],
)
REDIS_FALLBACKS = Counter(
    "rag_ratelimit_redis_fallback",
    "Rate-limit decisions taken by the in-process limiter because Redis failed.",
)

# database pool (app/db/pool.py)
DB_POOL_IN_USE = Gauge(
    "rag_db_pool_connections_in_use",
    "Database connections checked out of the pool now.",
    multiprocess_mode="livesum",
)
DB_POOL_OPEN = Gauge(
    "rag_db_pool_connections_open",
    "Database connections the pool holds open now (in use or idle).",
    multiprocess_mode="livesum",
)
DB_POOL_WAIT = Histogram(
    "rag_db_pool_wait_seconds",
    "Time a checkout waited because every connection of the pool was in use.",
    buckets=WAIT_BUCKETS,
)
DB_POOL_TIMEOUTS = Counter(
    "rag_db_pool_timeouts", "Checkouts that gave up waiting for a connection (pool_timeout)."
)

# ingestion (app/ingest/steps.py) and dedupe (app/retrieval/dedupe.py)
INGESTED_DOCUMENTS = Counter(
    "rag_ingest_documents",
    "Documents through ingestion, by outcome: written (new or changed), unchanged, failed.",
    ["outcome"],
)
INGESTED_CHUNKS = Counter("rag_ingest_chunks", "Chunks written by ingestion.")
# job callbacks (app/jobs/deliveries.py)
JOB_CALLBACK_ATTEMPTS = Counter(
    "rag_job_callback_attempts",
    "Job callback delivery attempts, by outcome: delivered, retry (failed, tried again later), "
    "failed (failed, and the retry window has passed).",
    ["outcome"],
)
DEDUPE_RUNS = Counter(
    "rag_dedupe_runs", "Near-duplicate searches, by dry_run (true: a preview).", ["dry_run"]
)
DEDUPE_REMOVED = Counter("rag_dedupe_removed_documents", "Documents removed by dedupe merges.")


def tenant_label(enabled: bool, tenant_id: str | None) -> str:
    """The `tenant` label's value: the id when RAG_METRICS_TENANT_LABEL is on, else empty."""
    return (tenant_id or "") if enabled else ""


def observe_search(mode: str, *, embed_seconds: float, database_seconds: float) -> None:
    SEARCH_STAGE.labels(mode, "embed").observe(embed_seconds)
    SEARCH_STAGE.labels(mode, "database").observe(database_seconds)


@contextmanager
def embedding_call(kind: str, texts: int) -> Iterator[None]:
    """Time one call to the provider and count it (an exception counts as an error)."""
    started = time.perf_counter()
    try:
        yield
    except Exception:
        EMBEDDING_CALLS.labels(kind, "error").inc()
        raise
    finally:
        EMBEDDING_SECONDS.labels(kind).observe(time.perf_counter() - started)
    EMBEDDING_CALLS.labels(kind, "ok").inc()
    EMBEDDED_TEXTS.labels(kind).inc(texts)
