"""What `rag eval` runs (app/cli/evaluate.py is the command: imported only when it runs)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path
from typing import Any

import httpx
import typer
from rich.console import Console
from rich.table import Table

from app.cli.database import database_settings
from app.cli.services import Services, open_services
from app.cli.settings import load_settings
from app.errors import AppError
from app.evaluation import BeirSet, EvalSetting, Scores, default_settings, evaluate, read_beir
from app.evaluation.beir import BeirDoc
from app.ingest.documents import ingest_documents
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from app.retrieval import SearchFilters, search_request
from app.retrieval import search as run_search
from app.settings import Settings

errors = Console(stderr=True)
BATCH = 100


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
    output: Path,
) -> None:
    """Measure retrieval quality per mode and fusion setting; print a table, write JSON."""
    if (url is None) == (tenant is None):
        errors.print("[red]error:[/red] give --tenant (local database) or --url and --token")
        raise typer.Exit(2)
    try:
        data = read_beir(folder, split=split, limit=limit)
        chosen = default_settings([float(w) for w in weights.split(",") if w.strip()])
    except (AppError, ValueError) as error:
        errors.print(f"[red]error:[/red] {getattr(error, 'detail', error)}")
        raise typer.Exit(2) from None
    scratch = (collection or f"eval-{folder.resolve().name}")[:128] if data.corpus else None
    if url is not None:
        if token is None:
            errors.print("[red]error:[/red] --url needs --token")
            raise typer.Exit(2)
        scores = asyncio.run(_over_http(url, token, data, chosen, scratch, top_k))
    else:
        assert tenant is not None
        with database_settings(load_settings()) as settings:
            scores = asyncio.run(_local(settings, tenant, data, chosen, scratch, top_k))
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
        "collection": scratch,
        "scores": {name: dataclasses.asdict(s) for name, s in scores.items()},
    }
    output.write_text(json.dumps(report, indent=2) + "\n")
    errors.print(f"written: {output}")


def _input(doc: BeirDoc, collection: str) -> DocumentInput:
    return DocumentInput(
        content=f"{doc.title}\n\n{doc.text}" if doc.title else doc.text,
        source_type=SourceType.TEXT,
        title=doc.title or None,
        external_id=doc.doc_id,
        collection=collection,
    )


async def _local(
    settings: Settings,
    tenant: str,
    data: BeirSet,
    chosen: list[EvalSetting],
    scratch: str | None,
    top_k: int,
) -> dict[str, Scores]:
    try:
        async with open_services(settings, tenant_id=tenant) as services:
            if data.corpus and scratch:
                await _ingest_local(services, tenant, data.corpus, scratch)

            async def searcher(query: str, setting: EvalSetting) -> list[str]:
                request = search_request(
                    settings,
                    services.embedder.model_id,
                    query=query,
                    mode=setting.mode,
                    top_k=top_k,
                    filters=SearchFilters(collections=[scratch] if scratch else None),
                    fusion=setting.fusion,
                    vector_weight=setting.vector_weight,
                )
                request = dataclasses.replace(request, threshold=None)
                outcome = await run_search(
                    services.sessions, services.embedder, tenant_id=tenant, request=request
                )
                return [hit.external_id for hit in outcome.hits]

            return await evaluate(searcher, data.queries, data.qrels, chosen)
    except AppError as error:
        errors.print(f"[red]error:[/red] {error.detail}")
        raise typer.Exit(2) from None


async def _ingest_local(
    services: Services, tenant: str, corpus: list[BeirDoc], collection: str
) -> None:
    for start in range(0, len(corpus), BATCH):
        await ingest_documents(
            services.sessions,
            services.embedder,
            chunker=services.chunker,
            tenant_id=tenant,
            documents=[_input(d, collection) for d in corpus[start : start + BATCH]],
        )
        errors.print(f"ingested {min(start + BATCH, len(corpus))}/{len(corpus)}")


async def _over_http(
    url: str,
    token: str,
    data: BeirSet,
    chosen: list[EvalSetting],
    scratch: str | None,
    top_k: int,
) -> dict[str, Scores]:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=300) as http:
        if data.corpus and scratch:
            for start in range(0, len(data.corpus), BATCH):
                documents = [
                    {
                        "title": d.title or None,
                        "content": f"{d.title}\n\n{d.text}" if d.title else d.text,
                        "external_id": d.doc_id,
                        "collection": scratch,
                    }
                    for d in data.corpus[start : start + BATCH]
                ]
                reply = await http.post("/api/rag/documents/batch", json={"documents": documents})
                _check(reply)

        async def searcher(query: str, setting: EvalSetting) -> list[str]:
            body: dict[str, Any] = {
                "query": query,
                "mode": setting.mode.value,
                "max_results": top_k,
                "threshold": 0.1,  # the API's lowest
                "fusion": setting.fusion.value if setting.fusion else None,
                "vector_weight": setting.vector_weight,
            }
            if scratch:
                body["collections"] = [scratch]
            reply = await http.post("/api/rag/search", json=body)
            _check(reply)
            return [chunk["external_id"] for chunk in reply.json()["chunks"]]

        return await evaluate(searcher, data.queries, data.qrels, chosen)


def _check(reply: httpx.Response) -> None:
    if reply.status_code >= 400:
        detail = reply.json().get("detail", reply.text) if reply.content else reply.status_code
        errors.print(f"[red]error:[/red] {reply.request.url.path}: {detail}")
        raise typer.Exit(2)
