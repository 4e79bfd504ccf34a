"""Options the commands share, and where a command runs: in this process, or against a
running service (`--url`). Light on purpose: `rag --help` imports this and nothing heavy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, NoReturn

import typer

# the domain's own choices (app.inputs.vocabulary imports the standard library alone)
from app.inputs.vocabulary import CitationStyle, FusionMethod, SearchMode

Mode = SearchMode
Style = CitationStyle
Fusion = FusionMethod

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar="RAG_URL",
        help="A running service, e.g. http://127.0.0.1:8000: work over HTTP (no local "
        "database or model).",
        show_default=False,
    ),
]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token",
        envvar="RAG_TOKEN",
        help="Bearer token for --url (`rag token --tenant T` prints one).",
        show_default=False,
    ),
]
TenantOption = Annotated[
    str | None,
    typer.Option(
        help="Tenant: required without --url; with --url the token's tenant is used (an admin "
        "token may name another).",
        show_default=False,
    ),
]
CollectionOption = Annotated[
    str | None, typer.Option(help="Collection (default: the service's default collection).")
]


@dataclass(frozen=True, slots=True)
class Remote:
    """A running service to talk to."""

    url: str
    token: str | None
    tenant: str | None


def remote(url: str | None, token: str | None, tenant: str | None) -> Remote | None:
    return Remote(url.rstrip("/"), token, tenant) if url else None


def required_tenant(tenant: str | None) -> str:
    if not tenant:
        fail("--tenant is required without --url (RAG_URL)")
    return tenant


def fail(message: str, *, status: int = 2) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(status)
