"""`rag bm25 verify` and `rag bm25 rebuild`: the keyword statistics against a recount."""

from __future__ import annotations

from typing import Annotated

import typer

bm25_app = typer.Typer(
    help="BM25 statistics (kept by triggers): verify or rebuild.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
TenantOption = Annotated[
    list[str] | None, typer.Option("--tenant", help="Only these tenants (default: all).")
]


@bm25_app.command()
def verify(tenant: TenantOption = None) -> None:
    """Recount every tenant's statistics from its chunks; exit status 1 when any differs."""
    from rich.console import Console

    from app.cli.bm25_run import run, table

    checks = run(tenant, rebuild=False)
    Console().print(table(checks, "BM25 statistics against a recount"))
    if not all(check.ok for check in checks):
        raise typer.Exit(1)


@bm25_app.command()
def rebuild(tenant: TenantOption = None) -> None:
    """Replace the statistics by a recount (one transaction per tenant; writers wait)."""
    from rich.console import Console

    from app.cli.bm25_run import run, table

    checks = run(tenant, rebuild=True)
    Console().print(table(checks, "BM25 statistics rebuilt"))
