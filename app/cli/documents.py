"""`rag documents list|show|delete`, `rag similar`, `rag dedupe`: in this process, or against a
running service with `--url`. Module level stays light (typer only)."""

from __future__ import annotations

import uuid
from typing import Annotated

import typer

from app.cli.options import (
    CollectionOption,
    Collections,
    MinSimilarity,
    Scope,
    TenantOption,
    TokenOption,
    TopK,
    UrlOption,
    remote,
    required_tenant,
)

documents_app = typer.Typer(
    help="List, show and delete a tenant's documents.", no_args_is_help=True, rich_markup_mode=None
)
DocumentId = Annotated[uuid.UUID, typer.Argument(metavar="DOCUMENT_ID", help="A document id.")]


@documents_app.command("list")
def list_documents(
    tenant: TenantOption = None,
    collection: CollectionOption = None,
    limit: Annotated[int, typer.Option(min=1, max=200)] = 50,
    offset: Annotated[int, typer.Option(min=0)] = 0,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """A page of the tenant's documents, newest first."""
    from rich.console import Console

    from app.cli.views import documents_table

    if target := remote(url, token, tenant):
        from app.cli.remote import connect

        with connect(target) as rag:
            page = rag.list_documents(collection=collection, limit=limit, offset=offset)
    else:
        who = required_tenant(tenant)  # before the import: a missing --tenant fails at once
        from app.cli import local

        page = local.list_documents(tenant=who, collection=collection, limit=limit, offset=offset)
    Console().print(documents_table(page))


@documents_app.command("show")
def show(
    document_id: DocumentId,
    tenant: TenantOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """One document's fields."""
    from rich.console import Console

    from app.cli.views import document_table

    if target := remote(url, token, tenant):
        from app.cli.remote import connect

        with connect(target) as rag:
            document = rag.get_document(document_id)
    else:
        who = required_tenant(tenant)  # before the import: a missing --tenant fails at once
        from app.cli import local

        document = local.get_document(document_id, tenant=who)
    Console().print(document_table(document))


@documents_app.command("delete")
def delete(
    document_id: DocumentId,
    tenant: TenantOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Delete a document and its chunks; prints its receipt's id."""
    if target := remote(url, token, tenant):
        from app.cli.remote import connect

        with connect(target) as rag:
            receipt = rag.delete_document(document_id)
    else:
        who = required_tenant(tenant)  # before the import: a missing --tenant fails at once
        from app.cli import local

        receipt = local.delete_document(document_id, tenant=who)
    typer.echo(f"deleted {document_id} (receipt {receipt})", err=True)


def similar(
    item_id: Annotated[uuid.UUID, typer.Argument(metavar="ID", help="A document (or chunk) id.")],
    chunk: Annotated[bool, typer.Option("--chunk", help="ID is a chunk, not a document.")] = False,
    top_k: TopK = None,
    min_similarity: MinSimilarity = None,
    scope: Scope = None,
    collection: Collections = None,
    include_same_document: Annotated[
        bool, typer.Option(help="Also chunks of the same document (with --chunk).")
    ] = False,
    tenant: TenantOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Items like a given document or chunk (in process, or with --url over HTTP); with
    --collection, in these collections (instead of --scope)."""
    from rich.console import Console

    from app.cli import backend
    from app.cli.views import similar_table
    from app.inputs.similar import SimilarInput

    question = backend.asked(
        SimilarInput,
        top_k=top_k,
        min_similarity=min_similarity,
        scope=scope,
        collections=collection or None,
        exclude_same_document=not include_same_document,
    )
    result = backend.run(
        url, token, tenant, lambda answers: answers.similar(item_id, question, chunk=chunk)
    )
    Console().print(similar_table(result.similar, of=str(item_id)))


def dedupe(
    threshold: Annotated[
        float | None,
        typer.Option(
            help="Similarity (0-1) at which documents match (default 0.95).", show_default=False
        ),
    ] = None,
    apply: Annotated[
        bool, typer.Option("--apply", help="Merge the duplicates (default: only show them).")
    ] = False,
    merge_strategy: Annotated[
        str | None,
        typer.Option(
            help="Which copy each group keeps: keep_newest (the last ingested), keep_oldest "
            "(the first ingested), keep_most_accessed (the most often returned by searches) or "
            "keep_latest_version (the latest source version, where every copy's reads as an "
            "ISO time or a number; else the last ingested). --apply without it merges only "
            "groups whose copies are the same text."
        ),
    ] = None,
    collection: Annotated[list[str] | None, typer.Option(help="Only these collections.")] = None,
    tenant: TenantOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
) -> None:
    """Near-duplicate documents: a preview, or merged with --apply (in process, or --url)."""
    from rich.console import Console

    from app.cli import backend
    from app.cli.views import dedupe_view
    from app.inputs.similar import DedupeInput

    question = backend.asked(
        DedupeInput,
        similarity_threshold=threshold,
        dry_run=not apply,
        merge_strategy=merge_strategy,
        collections=collection or None,
    )
    result = backend.run(url, token, tenant, lambda answers: answers.dedupe(question))
    Console().print(dedupe_view(result))
