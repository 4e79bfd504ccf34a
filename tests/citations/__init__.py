"""Tests of app.citations, with a plain chunk that satisfies `CitableChunk`."""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID


def doc_id(n: int) -> UUID:
    return UUID(int=n)


def chunk_uuid(n: int) -> UUID:
    return UUID(int=1_000_000 + n)


@dataclass(frozen=True, slots=True)
class Chunk:
    """A retrieved chunk as retrieval hands it over (its `Hit` has the same attributes)."""

    chunk_id: UUID
    document_id: UUID
    title: str
    content: str
    similarity: float = 0.8
    score: float = 0.8
    source_type: str = "text"
    source_url: str | None = None
    page_number: int | None = None
    section: tuple[str, ...] = ()
    chunk_index: int = 0


def make_chunk(
    n: int,
    document: int,
    title: str = "Document",
    *,
    content: str = "Some content.",
    similarity: float = 0.8,
    source_type: str = "text",
    source_url: str | None = None,
    page: int | None = None,
    section: tuple[str, ...] = (),
) -> Chunk:
    return Chunk(
        chunk_id=chunk_uuid(n),
        document_id=doc_id(document),
        title=title,
        content=content,
        similarity=similarity,
        score=similarity,
        source_type=source_type,
        source_url=source_url,
        page_number=page,
        section=section,
        chunk_index=n,
    )
