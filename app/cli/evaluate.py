"""`rag eval FOLDER`: nDCG@10, recall@10 and MRR@10 of every search mode and fusion setting on
the tenant's own judged queries (a BEIR folder), locally or over HTTP (`--url`, `--token`).

With a `corpus.jsonl` in the folder the documents are ingested first into a scratch collection
(`--collection`, default `eval-<folder>`; ingestion is idempotent, so a rerun embeds nothing)
and the searches are limited to it; without one, the qrels name documents by their
`external_id` in the tenant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def evaluate_command(
    folder: Annotated[
        Path, typer.Argument(help="BEIR folder: queries.jsonl, qrels/, corpus.jsonl (optional).")
    ],
    tenant: Annotated[str | None, typer.Option(help="Tenant (local database).")] = None,
    url: Annotated[str | None, typer.Option(help="The service's base URL (HTTP).")] = None,
    token: Annotated[str | None, typer.Option(help="Bearer token for --url.")] = None,
    split: Annotated[str, typer.Option(help="qrels/<split>.tsv")] = "test",
    limit: Annotated[int | None, typer.Option(min=1, help="Only the first N queries.")] = None,
    collection: Annotated[str | None, typer.Option(help="Scratch collection.")] = None,
    top_k: Annotated[int, typer.Option(min=1, max=20, help="Chunks per search.")] = 20,
    weights: Annotated[str, typer.Option(help="Weighted-fusion vector weights.")] = "0.3,0.5,0.7",
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
        output=output,
    )
