"""Browsing a tenant's content: its collections, and one document's chunks with citations."""

from __future__ import annotations

import uuid
from typing import Annotated, Self

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from app.api.deps import ResourcesDep, SearchCaller
from app.api.documents_models import DocumentOut
from app.api.openapi import GATED, errors
from app.citations import CitationGenerator, CitationStyle
from app.ingest.catalog import CollectionCount, StoredChunk
from app.operations import documents as operations
from app.storable import MAX_OFFSET

router = APIRouter(prefix="/api/rag", tags=["documents"], responses=GATED)


class CollectionOut(BaseModel):
    name: str
    documents: int
    chunks: int

    @classmethod
    def of(cls, found: CollectionCount) -> Self:
        return cls(name=found.name, documents=found.documents, chunks=found.chunks)


class CollectionList(BaseModel):
    items: list[CollectionOut] = Field(description="By name; those holding a visible document.")


@router.get("/collections", summary="List the tenant's collections with their counts")
async def collections(caller: SearchCaller, resources: ResourcesDep) -> CollectionList:
    found = await operations.collections(caller.sessions(resources), caller.tenant_id)
    return CollectionList(items=[CollectionOut.of(c) for c in found])


class StoredChunkOut(BaseModel):
    chunk_id: uuid.UUID
    chunk_index: int
    content: str
    page_number: int | None
    section: list[str]
    token_count: int
    citation: str = Field(description="This chunk's own source in the requested style.")

    @classmethod
    def of(cls, chunk: StoredChunk, generator: CitationGenerator) -> Self:
        return cls(
            chunk_id=chunk.chunk_id,
            chunk_index=chunk.chunk_index,
            content=chunk.content,
            page_number=chunk.page_number,
            section=list(chunk.section),
            token_count=chunk.token_count,
            citation=generator.label(chunk),
        )


class DocumentChunksOut(BaseModel):
    document: DocumentOut
    citation: str | None = Field(
        description="The document cited as a context block cites it, pages and common "
        "section taken from the chunks of this page (none when the page is empty)."
    )
    style: CitationStyle
    chunks: list[StoredChunkOut] = Field(description="In reading order (chunk_index).")
    total: int = Field(description="The document's chunks, all pages.")
    limit: int
    offset: int


@router.get(
    "/documents/{document_id}/chunks",
    summary="A document's chunks with their citations",
    responses=errors(404),
)
async def chunks_of(
    document_id: uuid.UUID,
    caller: SearchCaller,
    resources: ResourcesDep,
    style: Annotated[CitationStyle, Query()] = CitationStyle.NUMBERED,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> DocumentChunksOut:
    summary, found = await operations.chunks(
        caller.sessions(resources), caller.tenant_id, document_id, limit=limit, offset=offset
    )
    document = DocumentOut.of(summary)
    generator = CitationGenerator(style)
    cited = generator.generate(found)
    return DocumentChunksOut(
        document=document,
        citation=cited[0].text if cited else None,
        style=style,
        chunks=[StoredChunkOut.of(chunk, generator) for chunk in found],
        total=document.chunks,
        limit=limit,
        offset=offset,
    )
