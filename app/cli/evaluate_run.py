"""What `rag eval` runs (app/cli/evaluate.py is the command: imported only when it runs).

Every search is the one `rag search` asks (a SearchInput through app/cli/backend.py): the
search operation in this process, or POST /api/rag/search through the Python client with
`--url`, with the same options and defaults, so both ways score alike on the same data.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from app.cli import backend
from app.cli.backend import Backend
from app.errors import AppError
from app.evaluation import BeirSet, EvalSetting, Scores, default_settings, evaluate, read_beir
from app.evaluation.beir import BeirDoc
from app.inputs.search import SearchInput

errors = Console(stderr=True)
BATCH = 100


@dataclasses.dataclass(frozen=True, slots=True)
class Asked:
    """What each search asks besides its query and setting."""

    top_k: int
    threshold: float
    rerank: bool | None
    collection: str | None  # the scratch collection the corpus went to, or every one


def run(
    folder: Path,
    *,
    tenant: str | None,
    url: str | None,
    token: str | None,
    split: str,
    limit: int | None,
    collection: str | None,
    top_k: int,
    weights: str,
    threshold: float,
    rerank: bool | None,
    output: Path,
) -> None:
    """Measure retrieval quality per mode and fusion setting; print a table, write JSON."""
    try:
        data = read_beir(folder, split=split, limit=limit)
        chosen = default_settings([float(w) for w in weights.split(",") if w.strip()])
    except (AppError, ValueError) as error:
        errors.print(f"[red]error:[/red] {getattr(error, 'detail', error)}")
        raise typer.Exit(2) from None
    scratch = (collection or f"eval-{folder.resolve().name}")[:128] if data.corpus else None
    # checked before anything is opened: a bad option is refused as `rag search` refuses it
    asked = Asked(top_k=top_k, threshold=threshold, rerank=rerank, collection=scratch)
    search_input(asked, "query", chosen[0])
    scores = backend.run(url, token, tenant, lambda answers: measure(answers, data, chosen, asked))
    table = Table(title=f"{folder.name}: {len(data.queries)} queries ({split}), top_k {top_k}")
    for name in ("setting", "nDCG@10", "recall@10", "MRR@10"):
        table.add_column(name, justify="left" if name == "setting" else "right")
    for name, s in scores.items():
        table.add_row(name, f"{s.ndcg_at_10:.4f}", f"{s.recall_at_10:.4f}", f"{s.mrr_at_10:.4f}")
    Console().print(table)
    report: dict[str, Any] = {
        "folder": str(folder),
        "split": split,
        "queries": len(data.queries),
        "top_k": top_k,
        "threshold": threshold,
        "rerank": rerank,
        "collection": scratch,
        "scores": {name: dataclasses.asdict(s) for name, s in scores.items()},
    }
    output.write_text(json.dumps(report, indent=2) + "\n")
    errors.print(f"written: {output}")


def search_input(asked: Asked, query: str, setting: EvalSetting) -> SearchInput:
    """The search of `query` for `setting`, as `rag search` would ask it."""
    return backend.asked(
        SearchInput,
        query=query,
        mode=setting.mode,
        max_results=asked.top_k,
        threshold=asked.threshold,
        collections=[asked.collection] if asked.collection else None,
        fusion=setting.fusion,
        vector_weight=setting.vector_weight,
        rerank=asked.rerank,
    )


async def measure(
    answers: Backend, data: BeirSet, chosen: list[EvalSetting], asked: Asked
) -> dict[str, Scores]:
    """The corpus ingested into the scratch collection (when the folder has one), then every
    judged query searched for each setting, and the rankings scored."""
    if data.corpus and asked.collection:
        for start in range(0, len(data.corpus), BATCH):
            batch = data.corpus[start : start + BATCH]
            failed = await answers.ingest_texts([_document(d, asked.collection) for d in batch])
            if failed:
                errors.print(f"[red]error:[/red] {'; '.join(failed)}")
                raise typer.Exit(2)
            errors.print(f"ingested {min(start + BATCH, len(data.corpus))}/{len(data.corpus)}")

    async def searcher(query: str, setting: EvalSetting) -> list[str]:
        result = await answers.search(search_input(asked, query, setting))
        return [chunk.external_id for chunk in result.chunks]

    return await evaluate(searcher, data.queries, data.qrels, chosen)


def _document(doc: BeirDoc, collection: str) -> backend.TextDocument:
    return backend.TextDocument(
        content=f"{doc.title}\n\n{doc.text}" if doc.title else doc.text,
        title=doc.title or None,
        external_id=doc.doc_id,
        collection=collection,
    )
