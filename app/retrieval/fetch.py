"""One chunk, or one whole document, by id: its full text and its citation.

What a connector's `fetch` needs after a `search`: a chunk id gives that chunk's whole text; a
document id gives the document's text rebuilt from its chunks in order, the overlap between
consecutive chunks written once (chunks are trimmed substrings of their section, so a chunk
that starts with the end of the previous one continues it; others start a new paragraph).
Another tenant's id is not found, exactly like an unknown one (RLS and the tenant filter).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import ColumnElement, Row, select

from app.citations import CitationGenerator
from app.db.models import Chunk
from app.db.tenancy import SessionMaker, tenant_transaction
from app.errors import NotFound
from app.retrieval.hits import SOURCE_COLUMNS, Hit, hit_of, with_sources

MAX_DOCUMENT_CHARS = 200_000  # a whole document is cut here (`truncated`)
PARAGRAPH = "\n\n"
_PROBE_CHARS = 16


@dataclass(frozen=True, slots=True)
class Fetched:
    id: uuid.UUID
    kind: Literal["chunk", "document"]
    document_id: uuid.UUID
    external_id: str
    collection: str
    title: str
    text: str
    source_type: str
    source_url: str | None
    citation: str = ""
    pages: tuple[int, ...] = ()
    section: tuple[str, ...] = ()
    chunk_index: int | None = None
    total_chunks: int = 0
    truncated: bool = False
    metadata: dict[str, Any] | None = None


async def fetch_item(sessions: SessionMaker, *, tenant_id: str, item_id: uuid.UUID) -> Fetched:
    """The chunk or the document with this id; NotFound when the tenant has neither."""
    async with tenant_transaction(sessions, tenant_id) as session:
        rows = (await session.execute(_chunks(tenant_id, Chunk.id == item_id))).all()
        if rows:
            return _chunk(rows[0])
        rows = (await session.execute(_chunks(tenant_id, Chunk.document_id == item_id))).all()
        if rows:
            return _document(rows)
    raise NotFound(f"no chunk or document with id {item_id}")


def _chunks(tenant_id: str, condition: ColumnElement[bool]) -> Any:
    return (
        with_sources(select(*SOURCE_COLUMNS))
        .where(Chunk.tenant_id == tenant_id, condition)
        .order_by(Chunk.chunk_index)
    )


def _part(row: Row[Any]) -> Hit:
    """A stored chunk in the shape citations read (not ranked: no similarity, no score)."""
    return hit_of({**row._mapping, "similarity": 0.0}, score=0.0)


def _chunk(row: Row[Any]) -> Fetched:
    part = _part(row)
    return Fetched(
        id=part.chunk_id,
        kind="chunk",
        document_id=part.document_id,
        external_id=part.external_id,
        collection=part.collection,
        title=part.title,
        text=part.content,
        source_type=part.source_type,
        source_url=part.source_url,
        citation=CitationGenerator().label(part),
        pages=() if part.page_number is None else (part.page_number,),
        section=part.section,
        chunk_index=part.chunk_index,
        total_chunks=part.total_chunks,
        metadata=part.metadata,
    )


def _document(rows: Sequence[Row[Any]]) -> Fetched:
    parts = [_part(row) for row in rows]
    [citation] = CitationGenerator().generate(parts)
    text = join_chunks([part.content for part in parts])
    first = parts[0]
    return Fetched(
        id=first.document_id,
        kind="document",
        document_id=first.document_id,
        external_id=first.external_id,
        collection=first.collection,
        title=first.title,
        text=text[:MAX_DOCUMENT_CHARS],
        source_type=first.source_type,
        source_url=first.source_url,
        citation=citation.text.removeprefix(f"[{citation.number}] "),
        pages=citation.pages,
        section=citation.section,
        total_chunks=first.total_chunks,
        truncated=len(text) > MAX_DOCUMENT_CHARS,
        metadata=first.metadata,
    )


def join_chunks(texts: Sequence[str]) -> str:
    """Consecutive chunks as one text: an overlap written once, else a paragraph break."""
    joined = ""
    for text in texts:
        joined = _append(joined, text) if joined else text
    return joined


def _append(joined: str, text: str) -> str:
    """`text` after `joined`, without the part of `text` that repeats the end of `joined`."""
    probe = text[:_PROBE_CHARS]
    start = joined.find(probe, max(0, len(joined) - len(text)))
    while start != -1:
        tail = joined[start:]
        if text.startswith(tail):
            return joined + text[len(tail) :]
        start = joined.find(probe, start + 1)
    return joined + PARAGRAPH + text
