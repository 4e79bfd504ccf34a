"""The data commands in this process, on the configured (or embedded) database and model.

Each command opens the service's resources (as the operator: every document of the tenant),
makes the same call as the HTTP route (app/operations) and shapes the answer with the HTTP
API's own reply models, handed to the views as the Python client's models: a command prints
the same thing in process and over `--url`. The `*_on` functions are the call and the shaping
alone, on resources already open (tests/doors compares them with the other doors).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TypeVar

import rag_client
from pydantic import BaseModel
from rich.console import Console
from rich.progress import Progress

from app.api.context_models import ContextOut
from app.api.documents_models import DocumentList, DocumentOut
from app.api.search_models import SearchOut
from app.api.similar_models import DedupeOut, SimilarOut
from app.api.sync_models import SyncOut
from app.auth import TokenVerifier
from app.cli.backend import TextDocument
from app.cli.database import database_settings
from app.cli.files import SourceFile
from app.cli.ingest import ingest_files
from app.cli.options import fail
from app.cli.services import Services, open_services
from app.cli.settings import load_settings
from app.cli.views import Summary
from app.db.engine import create_engine, create_sessionmaker
from app.db.tenancy import SessionMaker, reading_as
from app.errors import AppError
from app.ingest import reindex as reindexing
from app.ingest.entries import Reference
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from app.ingest.steps import Outcome
from app.ingest.store import DEFAULT_COLLECTION
from app.inputs.search import ContextInput, SearchInput
from app.inputs.similar import DedupeInput, SimilarInput
from app.inputs.sync import SyncInput
from app.operations import documents as documents_operations
from app.operations import ingest as ingest_operations
from app.operations import search as search_operations
from app.operations import similar as similar_operations
from app.operations import sync as sync_operations
from app.permissions import EVERY_DOCUMENT
from app.resources import Resources, open_resources
from app.settings import Settings
from app.tenants import TenantDirectory

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


def _run(tenant: str | None, work: Callable[[Services], Awaitable[T]]) -> T:
    """`work` with the ingestion services open (database, model), its AppError as a one-line
    error."""

    async def opened(settings: Settings) -> T:
        async with open_services(settings, tenant_id=tenant) as services:
            return await work(services)

    return _in_process(opened)


def _serve(tenant: str, work: Callable[[Resources], Awaitable[T]]) -> T:
    """`work` on the service's resources, reading as the operator (every document of the
    tenant: docs/PERMISSIONS.md); its traffic counts are written when they close."""

    async def opened(settings: Settings) -> T:
        await _on_catalog(settings, tenant, _nothing)  # before the model loads: fails fast
        async with open_resources(settings, verifier=TokenVerifier([])) as resources:
            return await work(resources.reading_as_caller(EVERY_DOCUMENT))

    return _in_process(opened)


async def _nothing(_sessions: SessionMaker) -> None:
    return None


def _in_process(opened: Callable[[Settings], Coroutine[None, None, T]]) -> T:
    with database_settings(load_settings()) as settings:
        try:
            return asyncio.run(opened(settings))
        except AppError as error:
            fail(error.detail)


def _run_catalog(tenant: str, work: Callable[[SessionMaker], Awaitable[T]]) -> T:
    """`work` on the tenant's documents, without loading the model."""
    return _in_process(lambda settings: _on_catalog(settings, tenant, work))


async def _on_catalog(
    settings: Settings, tenant: str, work: Callable[[SessionMaker], Awaitable[T]]
) -> T:
    """`work` once the tenant is found active, on a one-connection engine of its own."""
    assert settings.database_url is not None
    engine = create_engine(settings.database_url.get_secret_value(), pool_size=1)
    try:
        # the operator's command: every document of the tenant (docs/PERMISSIONS.md)
        sessions = reading_as(create_sessionmaker(engine), EVERY_DOCUMENT)
        await TenantDirectory(sessions, ttl_seconds=0).require_active(tenant)
        return await work(sessions)
    finally:
        await engine.dispose()


def _as(model: type[M], reply: BaseModel) -> M:
    return model.model_validate(reply.model_dump(mode="json"))


def ingest(
    files: list[SourceFile],
    *,
    tenant: str,
    collection: str | None,
    access: tuple[str, ...] = (),
    console: Console,
) -> Summary:
    async def work(resources: Resources) -> Summary:
        chosen = collection or DEFAULT_COLLECTION
        return await ingest_files(
            resources, files, tenant_id=tenant, collection=chosen, access=access, console=console
        )

    return _serve(tenant, work)


@dataclass(frozen=True, slots=True)
class InProcess:
    """The data commands' questions on the service's resources in this process (app/cli/
    backend.py): the HTTP routes' operations and reply models."""

    resources: Resources
    tenant: str

    async def search(self, asked: SearchInput) -> rag_client.SearchResult:
        return await search_on(self.resources, self.tenant, asked)

    async def context(self, asked: ContextInput) -> rag_client.ContextResult:
        return await context_on(self.resources, self.tenant, asked)

    async def similar(
        self, item_id: uuid.UUID, asked: SimilarInput, *, chunk: bool
    ) -> rag_client.SimilarResult:
        return await similar_on(self.resources, self.tenant, item_id, asked, chunk)

    async def dedupe(self, asked: DedupeInput) -> rag_client.DedupeResult:
        return await dedupe_on(self.resources, self.tenant, asked)

    async def ingest_texts(self, documents: Sequence[TextDocument]) -> list[str]:
        failed: list[str] = []

        async def read() -> AsyncIterator[DocumentInput]:
            for d in documents:
                yield DocumentInput(
                    content=d.content,
                    source_type=SourceType.TEXT,
                    title=d.title,
                    external_id=d.external_id,
                    collection=d.collection,
                )

        async def heard(index: int, outcome: Outcome) -> None:
            if isinstance(outcome, AppError):
                failed.append(f"{documents[index].external_id}: {outcome.detail}")

        await ingest_operations.stream(
            self.resources, self.resources.sessions, self.tenant, read(), heard
        )
        return failed


def run(tenant: str, work: Callable[[InProcess], Awaitable[T]]) -> T:
    """`work` on the tenant's data in this process (app/cli/backend.py)."""
    return _serve(tenant, lambda resources: work(InProcess(resources, tenant)))


async def search_on(
    resources: Resources, tenant: str, asked: SearchInput
) -> rag_client.SearchResult:
    request, outcome = await search_operations.search(resources, tenant, asked)
    reply = SearchOut.of(outcome, mode=request.mode, threshold=request.threshold)
    return _as(rag_client.SearchResult, reply)


async def context_on(
    resources: Resources, tenant: str, asked: ContextInput
) -> rag_client.ContextResult:
    outcome = await search_operations.context(resources, tenant, asked)
    return _as(rag_client.ContextResult, ContextOut.of(outcome))


def list_documents(
    *, tenant: str, collection: str | None, limit: int, offset: int
) -> rag_client.DocumentPage:
    return _run_catalog(
        tenant,
        lambda sessions: documents_on(
            sessions, tenant, collection=collection, limit=limit, offset=offset
        ),
    )


async def documents_on(
    sessions: SessionMaker, tenant: str, *, collection: str | None, limit: int, offset: int
) -> rag_client.DocumentPage:
    found, total = await documents_operations.documents(
        sessions, tenant, collection=collection, limit=limit, offset=offset
    )
    items = [DocumentOut.of(s) for s in found]
    reply = DocumentList(items=items, total=total, limit=limit, offset=offset)
    return _as(rag_client.DocumentPage, reply)


def get_document(document_id: uuid.UUID, *, tenant: str) -> rag_client.Document:
    return _run_catalog(tenant, lambda sessions: document_on(sessions, tenant, document_id))


async def document_on(
    sessions: SessionMaker, tenant: str, document_id: uuid.UUID
) -> rag_client.Document:
    found = await documents_operations.read_document(sessions, tenant, document_id)
    return _as(rag_client.Document, DocumentOut.of(found))


def delete_document(document_id: uuid.UUID, *, tenant: str) -> uuid.UUID:
    """Delete it; its receipt's id."""

    async def opened(settings: Settings) -> uuid.UUID:
        async def work(sessions: SessionMaker) -> uuid.UUID:
            done = await sync_operations.delete_document(settings, sessions, tenant, document_id)
            return done.id

        return await _on_catalog(settings, tenant, work)

    return _in_process(opened)


def sync(
    tenant: str,
    collection: str,
    references: list[Reference],
    *,
    dry_run: bool,
    allow_empty: bool,
    max_deletions: int | float | None,
) -> rag_client.SyncResult:
    """A sync by references (`rag sync`: the files themselves go through `ingest`)."""
    asked = SyncInput(
        collection,
        references,
        dry_run=dry_run,
        allow_empty=allow_empty,
        max_deletions=max_deletions,
    )

    async def work(resources: Resources) -> rag_client.SyncResult:
        done = await sync_operations.sync(resources, resources.sessions, tenant, asked)
        return _as(rag_client.SyncResult, SyncOut.of(collection, done))

    return _serve(tenant, work)


async def similar_on(
    resources: Resources, tenant: str, item_id: uuid.UUID, asked: SimilarInput, chunk: bool
) -> rag_client.SimilarResult:
    """What GET /api/rag/{chunks|documents}/{id}/similar answers."""
    outcome = await similar_operations.similar(
        resources, tenant, item_id, asked, kind="chunk" if chunk else "document"
    )
    return _as(rag_client.SimilarResult, SimilarOut.of(outcome))


async def dedupe_on(
    resources: Resources, tenant: str, asked: DedupeInput
) -> rag_client.DedupeResult:
    """What POST /api/rag/dedupe answers."""
    outcome = await similar_operations.dedupe(resources, tenant, asked)
    return _as(rag_client.DedupeResult, DedupeOut.of(outcome))


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
