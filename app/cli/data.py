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
    Fusion,
    Mode,
    Style,
    TenantOption,
    TokenOption,
    UrlOption,
    fail,
    remote,
    required_tenant,
)
from app.inputs.vocabulary import MAX_RESULTS

Paths = Annotated[list[Path], typer.Argument(help="Files and folders (recursive).", exists=True)]
Query = Annotated[str, typer.Argument(help="What to look for.")]
ModeOption = Annotated[Mode, typer.Option(help="vector, keyword or hybrid.")]
MaxResults = Annotated[int, typer.Option(min=1, max=MAX_RESULTS)]
Threshold = Annotated[float | None, typer.Option(min=0.1, max=1.0)]
Collections = Annotated[list[str] | None, typer.Option("--collection", help="Only these.")]
EfSearch = Annotated[
    int | None,
    typer.Option(min=1, max=1000, help="HNSW ef_search (default: by the size of the index)."),
]
FusionOption = Annotated[
    Fusion | None, typer.Option(help="Hybrid mode: weighted (default) or rrf.", show_default=False)
]
VectorWeight = Annotated[
    float | None,
    typer.Option(min=0.0, max=1.0, help="Weighted fusion: the vector side's share (default 0.6)."),
]
Diversity = Annotated[
    float | None,
    typer.Option(min=0.0, max=1.0, help="0 keeps the ranking; towards 1 prefers varied chunks."),
]
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
    mode: ModeOption = Mode.VECTOR,
    max_results: MaxResults = 5,
    threshold: Threshold = None,
    collection: Collections = None,
    ef_search: EfSearch = None,
    fusion: FusionOption = None,
    vector_weight: VectorWeight = None,
    diversity: Diversity = None,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Search a tenant's documents and print the best chunks as a table."""
    from rich.console import Console

    from app.cli.views import results_table

    query = _non_empty(query)
    if target := remote(url, token, tenant):
        from app.cli.remote import connect

        with connect(target) as rag:
            result = rag.search(
                query,
                mode=mode.value,
                max_results=max_results,
                threshold=threshold,
                collections=collection or None,
                ef_search=ef_search,
                fusion=fusion.value if fusion else None,
                vector_weight=vector_weight,
                diversity=diversity,
            )
    else:
        who = required_tenant(tenant)  # before the import: a missing --tenant fails at once
        from app.cli import local

        result = local.search(
            who,
            query=query,
            mode=mode.value,
            max_results=max_results,
            threshold=threshold,
            collections=collection or None,
            ef_search=ef_search,
            fusion=fusion.value if fusion else None,
            vector_weight=vector_weight,
            diversity=diversity,
        )
    Console().print(results_table(result, query=query))
    if result.note:
        Console(stderr=True).print(f"note: {result.note}")


def context(
    query: Query,
    tenant: TenantOption = None,
    style: Annotated[Style, typer.Option(help="numbered, inline or compact.")] = Style.NUMBERED,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="The context's token budget (default: the service's).")
    ] = None,
    mode: ModeOption = Mode.VECTOR,
    max_results: MaxResults = 5,
    threshold: Threshold = None,
    collection: Collections = None,
    neighbors: Annotated[
        int, typer.Option(min=0, max=3, help="Chunks before and after each hit to add (0-3).")
    ] = 0,
    ef_search: EfSearch = None,
    fusion: FusionOption = None,
    vector_weight: VectorWeight = None,
    diversity: Diversity = None,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Build the cited context block an LLM prompt needs; the block goes to stdout, the
    citations table to stderr."""
    from rich.console import Console

    from app.cli.views import citations_table

    query = _non_empty(query)
    if target := remote(url, token, tenant):
        from app.cli.remote import connect

        with connect(target) as rag:
            result = rag.context(
                query,
                style=style.value,
                max_tokens=max_tokens,
                mode=mode.value,
                max_results=max_results,
                threshold=threshold,
                collections=collection or None,
                neighbors=neighbors or None,
                ef_search=ef_search,
                fusion=fusion.value if fusion else None,
                vector_weight=vector_weight,
                diversity=diversity,
            )
    else:
        who = required_tenant(tenant)  # before the import: a missing --tenant fails at once
        from app.cli import local

        result = local.context(
            who,
            query=query,
            style=style.value,
            max_tokens=max_tokens,
            mode=mode.value,
            max_results=max_results,
            threshold=threshold,
            collections=collection or None,
            neighbors=neighbors or None,
            ef_search=ef_search,
            fusion=fusion.value if fusion else None,
            vector_weight=vector_weight,
            diversity=diversity,
        )
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


def _non_empty(query: str) -> str:
    if not query.strip():
        fail("the query is empty")
    return query.strip()
