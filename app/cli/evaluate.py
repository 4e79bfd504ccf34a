"""`rag eval FOLDER`: nDCG@10, recall@10 and MRR@10 of every search mode and fusion setting on
the tenant's own judged queries (a BEIR folder), in this process (`--tenant`) or against a
running service (`--url`, `--token`). Each search is the one `rag search` asks, with the same
defaults both ways (app/cli/evaluate_run.py), so both score alike on the same data.

With a `corpus.jsonl` in the folder the documents are ingested first into a scratch collection
(`--collection`, default `eval-<folder>`; ingestion is idempotent, so a rerun embeds nothing)
and the searches are limited to it; without one, the qrels name documents by their
`external_id` in the tenant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from app.cli.options import Rerank, TenantOption, TokenOption, UrlOption


def evaluate_command(
    folder: Annotated[
        Path, typer.Argument(help="BEIR folder: queries.jsonl, qrels/, corpus.jsonl (optional).")
    ],
    tenant: TenantOption = None,
    url: UrlOption = None,
    token: TokenOption = None,
    split: Annotated[str, typer.Option(help="qrels/<split>.tsv")] = "test",
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N queries.")] = None,
    collection: Annotated[str | None, typer.Option(help="Scratch collection.")] = None,
    top_k: Annotated[int, typer.Option(help="Chunks per search (1-100).")] = 20,
    weights: Annotated[str, typer.Option(help="Weighted-fusion vector weights.")] = "0.3,0.5,0.7",
    # the lowest every door accepts: a ranking cut as little as a search can be (the model's
    # default threshold would leave relevant documents out of it)
    threshold: Annotated[
        float, typer.Option(help="Each search's lowest similarity (0.1-1).")
    ] = 0.1,
    rerank: Rerank = None,
    output: Annotated[Path, typer.Option("--json", help="Where to write the JSON.")] = Path(
        "rag-eval.json"
    ),
) -> None:
    """Measure retrieval quality per mode and fusion setting; print a table, write JSON."""
    from app.cli.evaluate_run import run

    run(
        folder,
        tenant=tenant,
        url=url,
        token=token,
        split=split,
        limit=limit,
        collection=collection,
        top_k=top_k,
        weights=weights,
        threshold=threshold,
        rerank=rerank,
        output=output,
    )
