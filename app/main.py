"""The app factory. Nothing runs at import: `create_app(settings)` builds the app."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

import app.db.tenancy  # noqa: F401  (registers the tenant hook once)
from app import __version__
from app.api import (
    admin,
    catalog,
    context,
    documents,
    formats,
    health,
    identity,
    jobs,
    mcp,
    metrics,
    search,
    similar,
    sync,
)
from app.api.console import install_console
from app.api.docs import install_docs
from app.api.middleware import BodyLimit, RateLimitHeaders, SingleHost
from app.api.observe import Observe, RequestId
from app.api.openapi import DESCRIPTION, TAGS, install_openapi
from app.api.problems import install_error_handlers
from app.db.autoindex import maintaining_indexes
from app.embeddings import Embedder
from app.jobs.queue import background_workers
from app.jobs.runner import JobServices
from app.mcp.http import serve_http
from app.observability.exposition import process_exited
from app.resources import Resources, open_resources
from app.settings import Settings


def create_app(settings: Settings | None = None, *, embedder: Embedder | None = None) -> FastAPI:
    """The service; `embedder` replaces the configured provider (tests, benchmarks)."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[dict[str, object]]:
        async with (
            open_resources(settings, embedder=embedder) as resources,
            serve_http(settings, resources.embedder.model_id) as mcp_http,
            background_workers(settings, job_services(resources), concurrency=settings.job_workers),
            maintaining_indexes(
                settings.database_url.get_secret_value() if settings.database_url else "",
                (
                    settings.migration_database_url.get_secret_value()
                    if settings.migration_database_url
                    else None
                ),
                every_seconds=settings.auto_index_seconds,
                min_chunks=settings.dedicated_index_min_chunks,
                build_memory_max_mb=settings.index_build_memory_max_mb,
            ),
        ):
            yield {"resources": resources, "mcp": mcp_http}
        process_exited()  # a worker of several: its live gauges leave the sums

    app = FastAPI(
        title="RAG retrieval service",
        version=__version__,
        description=DESCRIPTION,
        openapi_tags=TAGS,
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
    )
    install_error_handlers(app)
    app.add_middleware(RateLimitHeaders)
    app.add_middleware(
        BodyLimit,
        max_bytes=settings.upload_max_bytes,
        per_path={jobs.PATH: settings.job_max_request_bytes},
    )
    app.add_middleware(SingleHost)
    app.add_middleware(Observe, tenant_label=settings.metrics_tenant_label)
    app.add_middleware(RequestId)  # outermost: every reply the app sends carries X-Request-ID
    # A request's path is matched against the routers in this order, ~8 µs a router: the
    # hottest paths first (docs/BENCHMARKS.md, "The cost of one request")
    routers = (
        health,
        search,
        context,
        metrics,
        identity,
        formats,
        catalog,
        documents,
        sync,
        jobs,
        similar,
    )
    for module in (*routers, admin, mcp):
        app.include_router(module.router)
    install_docs(app)
    install_console(app)
    install_openapi(app)
    return app


def job_services(resources: Resources) -> JobServices:
    return JobServices(
        sessions=resources.sessions,
        embedder=resources.embedder,
        chunker=resources.chunker,
        parser=resources.parser,
        turn_documents=resources.settings.job_turn_documents,
        settings=resources.settings,
    )
