"""`rag sync FOLDER --collection NAME`: make a collection hold exactly the folder's files, in
this process or with --url through the service (docs/SYNC.md).

A file's external id is its path relative to the folder and its version the hash of its
bytes. Three steps, the same both ways:
1. a dry sync by references: which files the service lacks or holds at another version
   (`missing`), and what would be deleted (`--max-deletions` refuses here, before anything);
2. those files are ingested as `rag ingest` sends them (text in batches, other files as
   uploads), with their versions;
3. the sync by references: every file is then unchanged, and the documents of removed files
   are deleted, with a receipt.
With --dry-run only the first step runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from app.cli.data import AccessOption, access_list
from app.cli.options import TenantOption, TokenOption, UrlOption, fail, remote, required_tenant

if TYPE_CHECKING:
    import rag_client

    from app.cli.files import SourceFile
    from app.cli.views import Summary


def sync(
    folder: Annotated[
        Path, typer.Argument(exists=True, file_okay=False, help="The folder to mirror.")
    ],
    collection: Annotated[str, typer.Option(help="The collection that mirrors the folder.")],
    tenant: TenantOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    access: AccessOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would change; change nothing.")
    ] = False,
    max_deletions: Annotated[
        str | None,
        typer.Option(
            help="Refuse when more documents would be deleted: a count (10) or a fraction "
            "of the collection (0.05).",
        ),
    ] = None,
    allow_empty: Annotated[
        bool,
        typer.Option("--allow-empty", help="An empty folder empties the collection."),
    ] = False,
) -> None:
    """Mirror a folder into a collection: send new and changed files, delete the documents
    of removed ones; exit status 1 when a file failed."""
    from rich.console import Console

    from app.cli.files import collect, content_version
    from app.cli.views import failure_lines
    from app.ingest.entries import Reference

    limit = _limit(max_deletions)
    chosen = access_list(access)
    files = collect([folder])
    references = [Reference(f.external_id, content_version(f.path.read_bytes())) for f in files]
    errors = Console(stderr=True)
    target = remote(url, token, tenant)
    who = None if target else required_tenant(tenant)

    def by_reference(dry: bool) -> rag_client.SyncResult:
        if target is not None:
            from app.cli import remote as over_http

            return over_http.sync(
                target, collection, references, dry_run=dry, allow_empty=allow_empty,
                max_deletions=limit,
            )  # fmt: skip
        from app.cli import local

        assert who is not None
        return local.sync(
            who, collection, references, dry_run=dry, allow_empty=allow_empty,
            max_deletions=limit,
        )  # fmt: skip

    def send(chosen_files: list[SourceFile]) -> Summary:
        if target is not None:
            from app.cli import remote as over_http

            return over_http.ingest(
                target, chosen_files, collection=collection, access=chosen, console=errors
            )
        from app.cli import local

        assert who is not None
        return local.ingest(
            chosen_files, tenant=who, collection=collection, access=chosen, console=errors
        )

    planned = by_reference(True)
    missing = set(planned.missing)
    if dry_run:
        _report(planned, sent=sorted(missing), receipt=None)
        return
    outgoing = [f for f in files if f.external_id in missing]
    summary = send(outgoing) if outgoing else None
    done = by_reference(False)
    receipt = None if done.receipt is None else str(done.receipt.receipt_id)
    _report(done, sent=sorted(missing - set(summary.failed if summary else {})), receipt=receipt)
    if summary is not None and summary.failed:
        for line in failure_lines(summary):
            typer.echo(line)
        raise typer.Exit(1)


def _limit(raw: str | None) -> int | float | None:
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        pass
    try:
        return float(raw)
    except ValueError:
        fail(f"--max-deletions: {raw!r} is neither a count (10) nor a fraction (0.05)")


def _report(result: rag_client.SyncResult, *, sent: list[str], receipt: str | None) -> None:
    verb = "would " if result.dry_run else ""
    lines = [
        f"{verb}send {len(sent)} new or changed files",
        f"{len(result.unchanged) - (0 if result.dry_run else len(sent))} unchanged",
        f"{verb}delete {len(result.deleted)}",
    ]
    typer.echo(f"{result.collection}: " + ", ".join(lines))
    for name in sent:
        typer.echo(f"  {'+' if not result.dry_run else '?'} {name}")
    for name in result.deleted:
        typer.echo(f"  - {name}")
    if receipt is not None:
        typer.echo(f"receipt {receipt}")
