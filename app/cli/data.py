"""`rag ingest`, `rag search`, `rag reindex`: the data commands, on the configured database."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from app.cli.database import database_settings
from app.cli.ingest import Summary, collect, failure_lines, ingest_files, summary_table
from app.cli.services import open_services
from app.cli.settings import load_settings
from app.errors import AppError
from app.ingest import reindex as reindexing
from app.ingest.store import DEFAULT_COLLECTION
from app.retrieval import SearchFilters, SearchMode, SearchOutcome, search_request
from app.retrieval import search as run_search
from app.settings import Settings

errors = Console(stderr=True)
SNIPPET_CHARS = 120


def _fail(error: AppError) -> typer.Exit:
    errors.print(f"[red]error:[/red] {error.detail}")
    return typer.Exit(2)


def ingest(
    paths: Annotated[
        list[Path], typer.Argument(help="Files and folders (recursive).", exists=True)
    ],
    tenant: Annotated[str, typer.Option(help="Tenant that owns the documents.")],
    collection: Annotated[
        str, typer.Option(help="Collection to put them in.")
    ] = DEFAULT_COLLECTION,
) -> None:
    """Ingest files (PDF, markdown, HTML, text); exit status 1 when any file failed."""
    files = collect(paths)
    with database_settings(load_settings()) as settings:
        summary = asyncio.run(_ingest(settings, files, tenant=tenant, collection=collection))
    Console().print(summary_table(summary))
    if summary.failed:
        for line in failure_lines(summary):
            typer.echo(line)
        raise typer.Exit(1)


async def _ingest(
    settings: Settings, files: list[Path], *, tenant: str, collection: str
) -> Summary:
    try:
        async with open_services(settings, tenant_id=tenant) as services:
            return await ingest_files(
                services, files, tenant_id=tenant, collection=collection, console=errors
            )
    except AppError as error:
        raise _fail(error) from None


def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    tenant: Annotated[str, typer.Option(help="Tenant whose documents to search.")],
    mode: Annotated[
        SearchMode, typer.Option(help="vector, keyword or hybrid.")
    ] = SearchMode.VECTOR,
    max_results: Annotated[int, typer.Option(min=1, max=20)] = 5,
    threshold: Annotated[float | None, typer.Option(min=0.1, max=1.0)] = None,
    collection: Annotated[list[str] | None, typer.Option(help="Only these collections.")] = None,
) -> None:
    """Search a tenant's documents and print the best chunks as a table."""
    if not query.strip():
        errors.print("[red]error:[/red] the query is empty")
        raise typer.Exit(2)
    with database_settings(load_settings()) as settings:
        outcome = asyncio.run(
            _search(
                settings,
                tenant,
                query=query.strip(),
                mode=mode,
                top_k=max_results,
                threshold=threshold,
                filters=SearchFilters(collections=collection or None),
            )
        )
    Console().print(results_table(outcome, query=query.strip()))


async def _search(
    settings: Settings,
    tenant: str,
    *,
    query: str,
    mode: SearchMode,
    top_k: int,
    threshold: float | None,
    filters: SearchFilters,
) -> SearchOutcome:
    """The same search POST /api/rag/search runs for these inputs (retrieval/requests.py)."""
    try:
        async with open_services(settings, tenant_id=tenant) as services:
            request = search_request(
                settings,
                services.embedder.model_id,
                query=query,
                mode=mode,
                top_k=top_k,
                threshold=threshold,
                filters=filters,
            )
            return await run_search(
                services.sessions, services.embedder, tenant_id=tenant, request=request
            )
    except AppError as error:
        raise _fail(error) from None


def results_table(outcome: SearchOutcome, *, query: str) -> Table:
    table = Table(
        title=f"{query!r}: {len(outcome.hits)} of {outcome.total_found} found, "
        f"{outcome.timings_ms['total']:.0f} ms"
    )
    for name in ("#", "score", "similarity", "title", "page", "section", "text"):
        table.add_column(name, overflow="fold")
    for rank, hit in enumerate(outcome.hits, start=1):
        snippet = " ".join(hit.content.split())
        table.add_row(
            str(rank),
            f"{hit.score:.4f}",
            f"{hit.similarity:.3f}",
            hit.title,
            str(hit.page_number or ""),
            " → ".join(hit.section),
            snippet[:SNIPPET_CHARS] + ("…" if len(snippet) > SNIPPET_CHARS else ""),
        )
    return table


def reindex(
    batch_size: Annotated[int, typer.Option(min=1, help="Chunks embedded per batch.")] = 256,
    tenant: Annotated[list[str] | None, typer.Option(help="Only these tenants.")] = None,
) -> None:
    """Re-embed every chunk with the configured model (resumable: run it again to continue)."""
    with database_settings(load_settings()) as settings:
        done = asyncio.run(_reindex(settings, batch_size=batch_size, tenants=tenant or None))
    errors.print(f"re-embedded {done} chunks")


async def _reindex(settings: Settings, *, batch_size: int, tenants: list[str] | None) -> int:
    assert settings.migration_database_url is not None
    owner = settings.migration_database_url.get_secret_value()
    try:
        async with open_services(settings, tenant_id=None) as services:
            dims = services.embedder.dimensions
            if await reindexing.prepare_column(owner, dimensions=dims):
                errors.print(f"vector column changed to {dims} dimensions")
            model_id = services.embedder.model_id
            todo = sum(
                (await reindexing.pending(services.sessions, model_id, tenants=tenants)).values()
            )
            with Progress(console=errors, transient=True) as progress:
                task = progress.add_task(
                    f"re-embedding for {services.embedder.model_id}", total=todo
                )
                done = await reindexing.reembed(
                    services.sessions,
                    services.embedder,
                    batch_size=batch_size,
                    progress=lambda n: progress.advance(task, n),
                    tenants=tenants,
                )
            left = sum((await reindexing.pending(services.sessions, model_id)).values())
            if left:
                errors.print(f"{left} chunks of other tenants still need re-embedding")
            else:
                await reindexing.finish_column(owner)
            return done
    except AppError as error:
        raise _fail(error) from None
