"""The data commands in this process, on the configured (or embedded) database and model.

Each answer is shaped by the HTTP API's own reply models and handed to the views as the Python
client's models, so a command prints the same thing in process and over `--url`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import TypeVar

import rag_client
from pydantic import BaseModel
from rich.console import Console
from rich.progress import Progress

from app.api.context import ContextIn, ContextOut
from app.api.documents_models import DocumentList, DocumentOut
from app.api.search_models import SearchIn, SearchOut, to_filters
from app.api.similar_models import DedupeOut, SimilarOut
from app.cli.database import database_settings
from app.cli.files import SourceFile
from app.cli.ingest import ingest_files
from app.cli.options import fail
from app.cli.services import Services, open_services
from app.cli.settings import load_settings
from app.cli.views import Summary
from app.db.engine import create_engine, create_sessionmaker
from app.db.tenancy import SessionMaker, reading_as, tenant_transaction
from app.errors import AppError
from app.ingest import catalog
from app.ingest import reindex as reindexing
from app.ingest.store import DEFAULT_COLLECTION
from app.permissions import EVERY_DOCUMENT
from app.resources import build_token_counter
from app.retrieval import SearchRequest, retrieve_context, search_request
from app.retrieval import search as run_search
from app.retrieval.dedupe import DedupeRequest
from app.retrieval.dedupe import dedupe as run_dedupe
from app.retrieval.duplicates import MergeStrategy
from app.retrieval.similar import SearchScope, SimilarRequest, similar_to_chunk, similar_to_document
from app.settings import Settings
from app.tenants import TenantDirectory

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


def _run(tenant: str | None, work: Callable[[Services], Awaitable[T]]) -> T:
    """`work` with the services open (database, model), its AppError as a one-line error."""

    async def opened(settings: Settings) -> T:
        async with open_services(settings, tenant_id=tenant) as services:
            return await work(services)

    with database_settings(load_settings()) as settings:
        try:
            return asyncio.run(opened(settings))
        except AppError as error:
            fail(error.detail)


def _run_catalog(tenant: str, work: Callable[[SessionMaker], Awaitable[T]]) -> T:
    """`work` on the tenant's documents, without loading the model."""

    async def opened(settings: Settings) -> T:
        assert settings.database_url is not None
        engine = create_engine(settings.database_url.get_secret_value(), pool_size=1)
        try:
            # the operator's command: every document of the tenant (docs/PERMISSIONS.md)
            sessions = reading_as(create_sessionmaker(engine), EVERY_DOCUMENT)
            await TenantDirectory(sessions, ttl_seconds=0).require_active(tenant)
            return await work(sessions)
        finally:
            await engine.dispose()

    with database_settings(load_settings()) as settings:
        try:
            return asyncio.run(opened(settings))
        except AppError as error:
            fail(error.detail)


def _run_catalog_with_settings(
    tenant: str, work: Callable[[SessionMaker, Settings], Awaitable[T]]
) -> T:
    """`work` on the tenant's stored data with the settings, without loading the model."""
    settings = load_settings()
    return _run_catalog(tenant, lambda sessions: work(sessions, settings))


E = TypeVar("E", bound=StrEnum)


def _choice(kind: type[E], value: str | None, option: str) -> E | None:
    """`value` as one of `kind`'s members, or a one-line error naming the choices."""
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError:
        fail(f"{option}: {value!r} is not one of {', '.join(m.value for m in kind)}")


def _as(model: type[M], reply: BaseModel) -> M:
    return model.model_validate(reply.model_dump(mode="json"))


def _request(services: Services, body: SearchIn) -> SearchRequest:
    """What POST /api/rag/search makes of the same body (retrieval/requests.py)."""
    return search_request(
        services.settings,
        services.embedder.model_id,
        query=body.query,
        mode=body.mode,
        top_k=body.max_results,
        threshold=body.threshold,
        filters=to_filters(body),
    )


def ingest(
    files: list[SourceFile],
    *,
    tenant: str,
    collection: str | None,
    access: tuple[str, ...] = (),
    console: Console,
) -> Summary:
    async def work(services: Services) -> Summary:
        chosen = collection or DEFAULT_COLLECTION
        return await ingest_files(
            services, files, tenant_id=tenant, collection=chosen, access=access, console=console
        )

    return _run(tenant, work)


def search(tenant: str, **fields: object) -> rag_client.SearchResult:
    body = SearchIn.model_validate({k: v for k, v in fields.items() if v is not None})

    async def work(services: Services) -> SearchOut:
        request = _request(services, body)
        outcome = await run_search(
            services.sessions, services.embedder, tenant_id=tenant, request=request
        )
        return SearchOut.of(outcome, body=body, threshold=request.threshold)

    return _as(rag_client.SearchResult, _run(tenant, work))


def context(tenant: str, **fields: object) -> rag_client.ContextResult:
    body = ContextIn.model_validate({k: v for k, v in fields.items() if v is not None})

    async def work(services: Services) -> ContextOut:
        outcome = await retrieve_context(
            services.sessions,
            services.embedder,
            build_token_counter(services.settings, services.embedder),
            tenant_id=tenant,
            request=_request(services, body),
            style=body.style,
            max_tokens=body.max_tokens,
            max_chars=body.max_chars_per_chunk,
        )
        return ContextOut.of(outcome)

    return _as(rag_client.ContextResult, _run(tenant, work))


def list_documents(
    *, tenant: str, collection: str | None, limit: int, offset: int
) -> rag_client.DocumentPage:
    async def work(sessions: SessionMaker) -> DocumentList:
        async with tenant_transaction(sessions, tenant) as session:
            found, total = await catalog.list_documents(
                session, collection=collection, limit=limit, offset=offset
            )
        items = [DocumentOut.of(s) for s in found]
        return DocumentList(items=items, total=total, limit=limit, offset=offset)

    return _as(rag_client.DocumentPage, _run_catalog(tenant, work))


def get_document(document_id: uuid.UUID, *, tenant: str) -> rag_client.Document:
    async def work(sessions: SessionMaker) -> DocumentOut:
        async with tenant_transaction(sessions, tenant) as session:
            return DocumentOut.of(await catalog.get_document(session, document_id))

    return _as(rag_client.Document, _run_catalog(tenant, work))


def delete_document(document_id: uuid.UUID, *, tenant: str) -> None:
    async def work(sessions: SessionMaker) -> None:
        async with tenant_transaction(sessions, tenant) as session:
            await catalog.delete_document(session, document_id)

    _run_catalog(tenant, work)


def similar(
    item_id: uuid.UUID,
    *,
    tenant: str,
    chunk: bool,
    top_k: int | None,
    min_similarity: float | None,
    scope: str | None,
    exclude_same_document: bool,
) -> rag_client.SimilarResult:
    """What GET /api/rag/{chunks|documents}/{id}/similar answers; the stored vectors, no model."""
    defaults = SimilarRequest()
    chosen = _choice(SearchScope, scope, "--scope") or defaults.scope

    async def work(sessions: SessionMaker, settings: Settings) -> SimilarOut:
        request = SimilarRequest(
            top_k=top_k or defaults.top_k,
            min_similarity=defaults.min_similarity if min_similarity is None else min_similarity,
            exclude_same_document=exclude_same_document,
            scope=chosen,
            ef_search=settings.search_ef_search_default,
            candidates=settings.search_candidates,
        )
        if chunk:
            outcome = await similar_to_chunk(
                sessions, tenant_id=tenant, chunk_id=item_id, request=request
            )
        else:
            outcome = await similar_to_document(
                sessions, tenant_id=tenant, document_id=item_id, request=request
            )
        return SimilarOut.of(outcome)

    return _as(rag_client.SimilarResult, _run_catalog_with_settings(tenant, work))


def dedupe(
    *,
    tenant: str,
    threshold: float | None,
    dry_run: bool,
    merge_strategy: str | None,
    collections: list[str] | None,
) -> rag_client.DedupeResult:
    """What POST /api/rag/dedupe answers, on the local database."""
    defaults = DedupeRequest()
    strategy = _choice(MergeStrategy, merge_strategy, "--merge-strategy") or defaults.merge_strategy

    async def work(services: Services) -> DedupeOut:
        request = DedupeRequest(
            similarity_threshold=defaults.similarity_threshold if threshold is None else threshold,
            dry_run=dry_run,
            merge_strategy=strategy,
            collections=collections,
            ef_search=services.settings.search_ef_search_default,
        )
        outcome = await run_dedupe(
            services.sessions,
            tenant_id=tenant,
            model_id=services.embedder.model_id,
            request=request,
        )
        return DedupeOut.of(outcome)

    return _as(rag_client.DedupeResult, _run(tenant, work))


def reindex(*, batch_size: int, tenants: list[str] | None, console: Console) -> int:
    async def work(services: Services) -> int:
        settings = services.settings
        assert settings.migration_database_url is not None
        owner = settings.migration_database_url.get_secret_value()
        dims = services.embedder.dimensions
        if await reindexing.prepare_column(owner, dimensions=dims):
            console.print(f"vector column changed to {dims} dimensions")
        model_id = services.embedder.model_id
        todo = sum(
            (await reindexing.pending(services.sessions, model_id, tenants=tenants)).values()
        )
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task(f"re-embedding for {model_id}", total=todo)
            done = await reindexing.reembed(
                services.sessions,
                services.embedder,
                batch_size=batch_size,
                progress=lambda n: progress.advance(task, n),
                tenants=tenants,
            )
        left = sum((await reindexing.pending(services.sessions, model_id)).values())
        if left:
            console.print(f"{left} chunks of other tenants still need re-embedding")
        else:
            await reindexing.finish_column(owner)
        return done

    return _run(None, work)
