"""What the data commands print: the same tables whether the answer came from this process or
from a running service (both are the Python client's models)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field

from rag_client import (
    Chunk,
    ContextResult,
    DedupeResult,
    Document,
    DocumentPage,
    DocumentRef,
    DuplicateGroup,
    SearchResult,
    SimilarChunk,
)
from rich.console import Group
from rich.table import Table
from rich.text import Text

SNIPPET_CHARS = 120
WIDE = 100  # columns from which a table has room for whole ids
# What a table of chunks takes besides its title, section and text: the #, score, similarity
# and page columns, and 8 borders and 2 spaces of padding around each of its 7 columns.
CHUNK_TABLE_FIXED = (1 + 6 + 10 + 4) + 8 + 2 * 7


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
    # Figures keep their width; the text gets most of what is left and names a readable
    # minimum (left to itself, rich folds every column alike, a title into "Volcanoe/s").
    for name in ("#", "score", "similarity"):
        table.add_column(name, no_wrap=True)
    free = shutil.get_terminal_size().columns - CHUNK_TABLE_FIXED
    names = max(10, free * 2 // 9)
    table.add_column("title", overflow="fold", width=names)
    table.add_column("page", no_wrap=True)
    table.add_column("section", overflow="fold", width=names)
    table.add_column("text", overflow="fold", width=max(15, free - 2 * names))
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
    # The id whole on one line when the terminal has room (it is what the other commands
    # take); folded like the rest in a narrow one.
    whole = shutil.get_terminal_size().columns >= WIDE
    table.add_column("document_id", no_wrap=whole, overflow="fold")
    for name in ("external_id", "title", "collection"):
        table.add_column(name, overflow="fold")
    table.add_column("chunks", justify="right")
    table.add_column("updated", overflow="fold")
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


def plural(n: int, one: str, many: str | None = None) -> str:
    """ "1 group", "3 groups": a count with its noun agreeing."""
    return f"{n} {one if n == 1 else (many or one + 's')}"


def dedupe_view(result: DedupeResult) -> Group:
    """The groups (what each keeps and deletes), then what differs between their copies: the
    same preview the API replies and the console shows."""
    groups = result.duplicate_groups
    strategy = str(result.merge_strategy or "keep_newest")
    compares = result.strategies.get(strategy, strategy).split(":")[0]
    verb = "would delete" if result.dry_run else "deleted"
    title = (
        f"{plural(len(groups), 'group')}: {verb} {plural(result.total_duplicates, 'duplicate')}"
        f", keeping the {compares} copy ({strategy})"
    )
    table = Table(title=title)
    for name in ("keep (primary)", "delete (duplicates)", "avg similarity"):
        table.add_column(name, overflow="fold")
    for group in groups:
        primary, *duplicates = group.documents
        table.add_row(
            _document_line(primary),
            "\n".join(_document_line(d) for d in duplicates),
            f"{group.avg_similarity:.3f}",
        )
    parts: list[Table | Text] = [table]
    for number, group in enumerate(groups, start=1):
        parts.extend(_differences(number, group))
    return Group(*parts)


def _differences(number: int, group: DuplicateGroup) -> list[Text]:
    names = {d.id: f"{d.collection}/{d.external_id}" for d in group.documents}
    lines: list[Text] = []
    for difference in group.differences:
        kept, deleted = names[difference.compared_with], names[difference.document_id]
        head = f"group {number}: {deleted} against {kept}: "
        if difference.identical:
            lines.append(Text(head + "the same text"))
            continue
        count = len(difference.passages) + difference.passages_omitted
        lines.append(
            Text(head + plural(count, "passage") + (" differs" if count == 1 else " differ"))
        )
        for passage in difference.passages:
            lines.append(_passage("  keep   ", passage.primary, passage.primary_changed, "green"))
            lines.append(_passage("  delete ", passage.duplicate, passage.duplicate_changed, "red"))
        if difference.passages_omitted:
            lines.append(Text(f"  … {plural(difference.passages_omitted, 'more passage')}"))
    lines.extend(Text(f"note (group {number}): {note}", style="yellow") for note in group.notes)
    return lines


def _passage(label: str, text: str, changed: str, style: str) -> Text:
    line = Text(label, style=style)
    line.append(text or "(nothing)")
    if changed:
        line.highlight_words([changed], style=f"bold {style}")
    return line


def _document_line(doc: DocumentRef) -> str:
    return f"{doc.title} ({doc.collection}/{doc.external_id})\n{doc.id}"
