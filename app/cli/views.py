"""What the data commands print: the same tables whether the answer came from this process or
from a running service (both are the Python client's models)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rag_client import (
    Chunk,
    ContextResult,
    DedupeResult,
    Document,
    DocumentPage,
    SearchResult,
    SimilarChunk,
)
from rich.table import Table

SNIPPET_CHARS = 120


@dataclass(slots=True)
class Summary:
    files: int = 0
    chunks: int = 0
    embedded: int = 0
    unchanged: int = 0
    failed: dict[str, str] = field(default_factory=dict)


def summary_table(summary: Summary) -> Table:
    table = Table(title="ingest summary")
    for name in ("files", "chunks", "embedded", "unchanged", "failed"):
        table.add_column(name, justify="right")
    counts = (summary.files, summary.chunks, summary.embedded, summary.unchanged)
    table.add_row(*(str(v) for v in counts), str(len(summary.failed)))
    return table


def failure_lines(summary: Summary) -> list[str]:
    """One line per failed file, whole (a table would fold long paths)."""
    return [f"failed: {file}: {reason}" for file, reason in summary.failed.items()]


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat[:SNIPPET_CHARS] + ("…" if len(flat) > SNIPPET_CHARS else "")


def results_table(result: SearchResult, *, query: str) -> Table:
    table = Table(
        title=f"{query!r}: {len(result.chunks)} of {result.total_found} found, "
        f"{result.search_time_ms:.0f} ms"
    )
    return _chunks(table, result.chunks)


def _chunks(table: Table, chunks: Sequence[Chunk | SimilarChunk]) -> Table:
    for name in ("#", "score", "similarity", "title", "page", "section", "text"):
        table.add_column(name, overflow="fold")
    for rank, chunk in enumerate(chunks, start=1):
        table.add_row(
            str(rank),
            f"{chunk.score:.4f}" if chunk.score is not None else "",
            f"{chunk.similarity:.3f}",
            chunk.title,
            str(chunk.page_number or ""),
            " → ".join(chunk.section),
            _snippet(chunk.content),
        )
    return table


def similar_table(chunks: Sequence[SimilarChunk], *, of: str) -> Table:
    return _chunks(Table(title=f"like {of}: {len(chunks)} found"), chunks)


def citations_table(result: ContextResult) -> Table:
    metrics = result.metrics
    table = Table(
        title=f"{metrics.chunks_used} chunks, {metrics.total_tokens} tokens, "
        f"quality {metrics.quality_score:.2f}"
    )
    for name in ("#", "citation", "document"):
        table.add_column(name, overflow="fold")
    for citation in result.citations:
        table.add_row(str(citation.number), citation.text, str(citation.document_id))
    return table


def documents_table(page: DocumentPage) -> Table:
    shown = f"{page.offset + 1}-{page.offset + len(page.items)}" if page.items else "none"
    table = Table(title=f"documents {shown} of {page.total}")
    for name in ("document_id", "external_id", "title", "collection", "chunks", "updated"):
        table.add_column(name, overflow="fold")
    for doc in page.items:
        table.add_row(
            str(doc.document_id),
            doc.external_id,
            doc.title,
            doc.collection,
            str(doc.chunks),
            doc.updated_at.strftime("%Y-%m-%d %H:%M"),
        )
    return table


def document_table(doc: Document) -> Table:
    table = Table(show_header=False, title=doc.title)
    table.add_column("field")
    table.add_column("value", overflow="fold")
    for name, value in doc.model_dump(mode="json").items():
        table.add_row(name, str(value))
    return table


def dedupe_table(result: DedupeResult) -> Table:
    verb = "would merge" if result.dry_run else "merged"
    table = Table(title=f"{result.total_duplicates} duplicates ({verb})")
    for name in ("primary", "duplicates", "avg similarity"):
        table.add_column(name, overflow="fold")
    for group in result.duplicate_groups:
        table.add_row(
            str(group.primary_id),
            "\n".join(str(d) for d in group.duplicate_ids),
            f"{group.avg_similarity:.3f}",
        )
    return table
