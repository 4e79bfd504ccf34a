"""Options the commands share, and where a command runs: in this process, or against a
running service (`--url`). Light on purpose: `rag --help` imports this and nothing heavy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, NoReturn

import typer

# the domain's own choices (app.inputs.vocabulary imports the standard library alone)
from app.inputs.vocabulary import (
    DEFAULT_MAX_RESULTS,
    DEFAULT_MAX_TOKENS,
    DEFAULT_MIN_SIMILARITY,
    DEFAULT_SIMILAR_TOP_K,
    CitationStyle,
    FusionMethod,
    SearchMode,
)

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

# The options of the questions (app/inputs/search.py, similar.py), each declared once. Their
# bounds are the inputs' own: a command builds the input (app/cli/backend.py `asked`) and
# refuses what every other door refuses, with the same message.
Query = Annotated[str, typer.Argument(help="What to look for.")]
ModeOption = Annotated[Mode, typer.Option(help="vector, keyword or hybrid.")]
MaxResults = Annotated[
    int | None,
    typer.Option(
        help=f"At most this many chunks (1-100; default {DEFAULT_MAX_RESULTS}).",
        show_default=False,
    ),
]
Threshold = Annotated[
    float | None,
    typer.Option(
        help="Lowest similarity, 0.1-1 (default: the model's).",
        show_default=False,
    ),
]
Collections = Annotated[list[str] | None, typer.Option("--collection", help="Only these.")]
EfSearch = Annotated[
    int | None,
    typer.Option(
        help="HNSW ef_search, 1-1000 (default: by the size of the index).", show_default=False
    ),
]
FusionOption = Annotated[
    Fusion | None, typer.Option(help="Hybrid mode: weighted (default) or rrf.", show_default=False)
]
VectorWeight = Annotated[
    float | None,
    typer.Option(
        help="Weighted fusion: the vector side's share, 0-1 (default 0.6).", show_default=False
    ),
]
Diversity = Annotated[
    float | None,
    typer.Option(
        help="0-1: 0 keeps the ranking; towards 1 prefers varied chunks.", show_default=False
    ),
]
Rerank = Annotated[
    bool | None,
    typer.Option(
        "--rerank/--no-rerank",
        help="Order the candidates with the service's reranker (RAG_RERANK_PROVIDER); default: "
        "on when one is configured.",
        show_default=False,
    ),
]
StyleOption = Annotated[Style, typer.Option(help="numbered, inline or compact.")]
MaxTokens = Annotated[
    int | None,
    typer.Option(
        help=f"The context's token budget (1-200000; default {DEFAULT_MAX_TOKENS}).",
        show_default=False,
    ),
]
Neighbors = Annotated[
    int | None,
    typer.Option(
        help="Chunks before and after each hit to add (0-3; default 0).",
        show_default=False,
    ),
]
TopK = Annotated[
    int | None,
    typer.Option(
        help=f"At most this many (1-100; default {DEFAULT_SIMILAR_TOP_K}).",
        show_default=False,
    ),
]
MinSimilarity = Annotated[
    float | None,
    typer.Option(
        help=f"Lowest similarity (0-1; default {DEFAULT_MIN_SIMILARITY}).",
        show_default=False,
    ),
]
Scope = Annotated[
    str | None,
    typer.Option(
        help="current (the item's collection, default), shared (and 'shared') or all.",
        show_default=False,
    ),
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
