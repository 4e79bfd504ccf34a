"""`rag ingest`, `rag search`, `rag context`, `rag reindex`: in this process, or against a
running service with `--url` (then no database or model is loaded here).

Module level stays light (typer only): the work is imported when a command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli.options import (
    CollectionOption,
    Collections,
    Diversity,
    EfSearch,
    FusionOption,
    MaxResults,
    MaxTokens,
    ModeOption,
    Neighbors,
    Query,
    Rerank,
    StyleOption,
    TenantOption,
    Threshold,
    TokenOption,
    UrlOption,
    VectorWeight,
    fail,
    remote,
    required_tenant,
)
from app.inputs.vocabulary import CitationStyle, SearchMode

Paths = Annotated[list[Path], typer.Argument(help="Files and folders (recursive).", exists=True)]
AccessOption = Annotated[
    list[str] | None,
    typer.Option(
        "--access",
        help="Who may see the documents: user:<subject> or group:<name> (repeat it, or "
        "separate with commas). Left out: every member of the tenant.",
    ),
]


def access_list(values: list[str] | None) -> tuple[str, ...]:
    """--access values (repeated or comma-separated) as an access list; exit 2 when bad."""
    from app.permissions import normalized_access

    parts = [part.strip() for value in values or [] for part in value.split(",") if part.strip()]
    try:
        return normalized_access(parts)
    except ValueError as error:
        fail(f"--access: {error}")


def ingest(
    paths: Paths,
    tenant: TenantOption = None,
    collection: CollectionOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    access: AccessOption = None,
    background: Annotated[
        bool,
        typer.Option(
            "--background",
            help="With --url: submit ingestion jobs and show the service's progress (large "
            "files and folders; the work goes on if this command stops).",
        ),
    ] = False,
    callback_url: Annotated[
        str | None,
        typer.Option(
            "--callback-url",
            help="With --background: the service POSTs each job's summary here, signed "
            "(Standard Webhooks), when it ends.",
        ),
    ] = None,
) -> None:
    """Ingest files (PDF, Word, PowerPoint, Excel, EPUB, ODT, markdown, HTML, text); exit
    status 1 when any file failed.

    A file's external id is its path relative to the folder given, so ingesting again updates
    the same documents. With --url the files are sent to the service.
    """
    from rich.console import Console

    from app.cli.files import collect
    from app.cli.views import failure_lines, summary_table

    chosen = access_list(access)
    files = collect(paths)
    errors = Console(stderr=True)
    if not files:
        errors.print("nothing to do: no files under the paths given")
        return
    if background and not url:
        fail("--background needs --url (or RAG_URL): jobs run on a service")
    if callback_url and not background:
        fail("--callback-url needs --background: a job calls back when it ends")
    if target := remote(url, token, tenant):
        from app.cli import remote as over_http

        if background:
            summary = over_http.ingest_background(
                target,
                files,
                collection=collection,
                access=chosen,
                callback_url=callback_url,
                console=errors,
            )
        else:
            summary = over_http.ingest(
                target, files, collection=collection, access=chosen, console=errors
            )
    else:
        who = required_tenant(tenant)  # before the import: a missing --tenant fails at once
        from app.cli import local

        summary = local.ingest(
            files, tenant=who, collection=collection, access=chosen, console=errors
        )
    Console().print(summary_table(summary))
    if summary.failed:
        for line in failure_lines(summary):
            typer.echo(line)
        raise typer.Exit(1)


def search(
    query: Query,
    tenant: TenantOption = None,
    mode: ModeOption = SearchMode.VECTOR,
    max_results: MaxResults = None,
    threshold: Threshold = None,
    collection: Collections = None,
    ef_search: EfSearch = None,
    fusion: FusionOption = None,
    vector_weight: VectorWeight = None,
    diversity: Diversity = None,
    rerank: Rerank = None,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Search a tenant's documents and print the best chunks as a table."""
    from rich.console import Console

    from app.cli import backend
    from app.cli.views import results_table
    from app.inputs.search import SearchInput

    question = backend.asked(
        SearchInput,
        query=query,
        mode=mode,
        max_results=max_results,
        threshold=threshold,
        collections=collection or None,
        ef_search=ef_search,
        fusion=fusion,
        vector_weight=vector_weight,
        diversity=diversity,
        rerank=rerank,
    )
    result = backend.run(url, token, tenant, lambda answers: answers.search(question))
    Console().print(results_table(result, query=question.query))
    if result.note:
        Console(stderr=True).print(f"note: {result.note}")


def context(
    query: Query,
    tenant: TenantOption = None,
    style: StyleOption = CitationStyle.NUMBERED,
    max_tokens: MaxTokens = None,
    mode: ModeOption = SearchMode.VECTOR,
    max_results: MaxResults = None,
    threshold: Threshold = None,
    collection: Collections = None,
    neighbors: Neighbors = None,
    ef_search: EfSearch = None,
    fusion: FusionOption = None,
    vector_weight: VectorWeight = None,
    diversity: Diversity = None,
    rerank: Rerank = None,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Build the cited context block an LLM prompt needs; the block goes to stdout, the
    citations table to stderr."""
    from rich.console import Console

    from app.cli import backend
    from app.cli.views import citations_table
    from app.inputs.search import ContextInput

    question = backend.asked(
        ContextInput,
        query=query,
        style=style,
        max_tokens=max_tokens,
        mode=mode,
        max_results=max_results,
        threshold=threshold,
        collections=collection or None,
        neighbors=neighbors,
        ef_search=ef_search,
        fusion=fusion,
        vector_weight=vector_weight,
        diversity=diversity,
        rerank=rerank,
    )
    result = backend.run(url, token, tenant, lambda answers: answers.context(question))
    typer.echo(result.context)
    Console(stderr=True).print(citations_table(result))


def reindex(
    batch_size: Annotated[int, typer.Option(min=1, help="Chunks embedded per batch.")] = 256,
    tenant: Annotated[list[str] | None, typer.Option(help="Only these tenants.")] = None,
) -> None:
    """Re-embed every chunk with the configured model (resumable: run it again to continue)."""
    from rich.console import Console

    from app.cli import local

    errors = Console(stderr=True)
    done = local.reindex(batch_size=batch_size, tenants=tenant or None, console=errors)
    errors.print(f"re-embedded {done} chunks")
