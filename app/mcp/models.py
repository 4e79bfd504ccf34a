"""What the MCP tools answer: their output schemas, shaped from the domain's results.

`SimilarResults` is the exact reply of the local `search_similar` tool this service replaces
(`{success, count, documents[…]}`); `SearchResults` and `FetchedItem` are the `search`/`fetch`
pair chat-assistant connectors call; `ContextReply` mirrors POST /api/rag/context's fields.
"""

from __future__ import annotations

import uuid
from pathlib import PurePosixPath
from typing import Literal, Self
from urllib.parse import urlparse

from pydantic import BaseModel, Field, JsonValue

from app.citations import ContextResult, format_chunk_for_context
from app.inputs.replies import DifferenceOut, MetricsOut
from app.retrieval import ContextOutcome, Fetched, Hit, SearchOutcome
from app.retrieval.dedupe import DedupeOutcome
from app.retrieval.similar import SimilarOutcome

SNIPPET_CHARS = 500


def source_file(hit: Hit) -> str:
    """The document's file name: its `filename` metadata, else the last segment of a file or
    URL path that has a suffix (`api_guide.pdf`), else its title."""
    name = hit.metadata.get("filename")
    if isinstance(name, str) and name:
        return name
    if hit.source_url:
        last = PurePosixPath(urlparse(hit.source_url).path).name
        if PurePosixPath(last).suffix:
            return last
    return hit.title


class SimilarDocument(BaseModel):
    id: uuid.UUID = Field(description="The chunk's id; `fetch` gives its full text and citation.")
    content: str = Field(description="The chunk's text.")
    similarity: float = Field(description="Cosine similarity to the query (1 - cosine distance).")
    source_file: str = Field(description="The document's file name, else its title.")
    source_type: str = Field(
        description="text, markdown, html, pdf, docx, pptx, xlsx, epub or odt."
    )
    chunk_index: int = Field(description="Position of the chunk in its document, from 0.")
    page_number: int | None = Field(description="PDF page or PowerPoint slide of the chunk.")
    total_chunks: int = Field(description="Chunks in the document.")
    metadata: dict[str, JsonValue] = Field(description="The document's metadata.")

    @classmethod
    def of(cls, hit: Hit) -> Self:
        return cls(
            id=hit.chunk_id,
            content=hit.content,
            similarity=hit.similarity,
            source_file=source_file(hit),
            source_type=hit.source_type,
            chunk_index=hit.chunk_index,
            page_number=hit.page_number,
            total_chunks=hit.total_chunks,
            metadata=hit.metadata,
        )


class SimilarResults(BaseModel):
    success: bool = Field(description="Always true: failures are tool errors.")
    count: int = Field(description="How many documents (chunks) follow.")
    documents: list[SimilarDocument] = Field(description="Most similar first.")

    @classmethod
    def of(cls, outcome: SearchOutcome) -> Self:
        hits = [SimilarDocument.of(hit) for hit in outcome.hits]
        return cls(success=True, count=len(hits), documents=hits)


def citation_url(document_id: uuid.UUID, source_url: str | None) -> str:
    """The document's own URL, else its MCP resource (`rag://documents/{id}`)."""
    return source_url or f"rag://documents/{document_id}"


class SearchResult(BaseModel):
    id: uuid.UUID = Field(description="The chunk's id, for `fetch`.")
    title: str
    url: str = Field(description="Where to cite it: the source URL, else its rag:// resource.")
    text: str = Field(description=f"A snippet of the chunk (up to {SNIPPET_CHARS} characters).")

    @classmethod
    def of(cls, hit: Hit) -> Self:
        return cls(
            id=hit.chunk_id,
            title=hit.title,
            url=citation_url(hit.document_id, hit.source_url),
            text=format_chunk_for_context(hit.content, SNIPPET_CHARS),
        )


class SearchResults(BaseModel):
    results: list[SearchResult] = Field(description="Best first.")

    @classmethod
    def of(cls, outcome: SearchOutcome) -> Self:
        return cls(results=[SearchResult.of(hit) for hit in outcome.hits])


class FetchedMetadata(BaseModel):
    kind: Literal["chunk", "document"]
    document_id: uuid.UUID
    external_id: str
    collection: str
    source_type: str
    source_url: str | None
    citation: str = Field(description="How to cite it: **Title** (PDF, Pages 3, 5) _Section_.")
    pages: list[int]
    section: list[str]
    chunk_index: int | None = Field(description="The chunk's position (chunks only).")
    total_chunks: int
    truncated: bool = Field(description="The document's text was cut (very long documents).")
    document: dict[str, JsonValue] = Field(description="The document's own metadata.")


class FetchedItem(BaseModel):
    id: uuid.UUID
    title: str
    text: str = Field(description="The chunk's full text, or the whole document's.")
    url: str = Field(description="Where to cite it: the source URL, else its rag:// resource.")
    metadata: FetchedMetadata

    @classmethod
    def of(cls, item: Fetched) -> Self:
        return cls(
            id=item.id,
            title=item.title,
            text=item.text,
            url=citation_url(item.document_id, item.source_url),
            metadata=FetchedMetadata(
                kind=item.kind,
                document_id=item.document_id,
                external_id=item.external_id,
                collection=item.collection,
                source_type=item.source_type,
                source_url=item.source_url,
                citation=item.citation,
                pages=list(item.pages),
                section=list(item.section),
                chunk_index=item.chunk_index,
                total_chunks=item.total_chunks,
                truncated=item.truncated,
                document=item.metadata or {},
            ),
        )


class ContextCitation(BaseModel):
    number: int = Field(description="The [n] the context's blocks use for this document.")
    document_id: uuid.UUID
    title: str
    text: str = Field(description="The citation formatted in the requested style.")
    pages: list[int]
    source_url: str | None


class ContextReply(BaseModel):
    context: str = Field(description="Numbered blocks ready for a prompt, each with its source.")
    citations: list[ContextCitation]
    metrics: MetricsOut
    total_found: int = Field(description="Chunks that matched, before the token budget.")
    dropped: int = Field(description="Chunks found but left out to respect max_tokens.")

    @classmethod
    def of(cls, outcome: ContextOutcome) -> Self:
        built: ContextResult[Hit] = outcome.built
        return cls(
            context=built.context,
            citations=[
                ContextCitation(
                    number=c.number,
                    document_id=c.document_id,
                    title=c.title,
                    text=c.text,
                    pages=list(c.pages),
                    source_url=c.source_url,
                )
                for c in built.citations
            ],
            metrics=MetricsOut.of(built.metrics),
            total_found=outcome.found.total_found,
            dropped=built.dropped,
        )


class SimilarItem(BaseModel):
    chunk_id: uuid.UUID = Field(description="For `fetch`.")
    document_id: uuid.UUID
    title: str
    url: str = Field(description="Where to cite it: the source URL, else its rag:// resource.")
    similarity: float = Field(description="1 - cosine distance (documents': of their vectors).")
    text: str = Field(description=f"A snippet of the chunk (up to {SNIPPET_CHARS} characters).")

    @classmethod
    def of(cls, hit: Hit) -> Self:
        return cls(
            chunk_id=hit.chunk_id,
            document_id=hit.document_id,
            title=hit.title,
            url=citation_url(hit.document_id, hit.source_url),
            similarity=hit.similarity,
            text=format_chunk_for_context(hit.content, SNIPPET_CHARS),
        )


class SimilarItems(BaseModel):
    item_id: uuid.UUID
    kind: str = Field(description="chunk or document: what the id named.")
    count: int
    similar: list[SimilarItem] = Field(description="Most similar first.")

    @classmethod
    def of(cls, outcome: SimilarOutcome) -> Self:
        items = [SimilarItem.of(hit) for hit in outcome.similar]
        return cls(item_id=outcome.item_id, kind=outcome.kind, count=len(items), similar=items)


class DuplicateGroupOut(BaseModel):
    primary_id: uuid.UUID = Field(description="The document a merge would keep (newest).")
    primary_title: str
    duplicate_ids: list[uuid.UUID]
    duplicate_titles: list[str]
    avg_similarity: float
    differences: list[DifferenceOut] = Field(
        description="What differs between each duplicate and the primary (the passages a "
        "merge would lose), as POST /api/rag/dedupe says it."
    )


class Duplicates(BaseModel):
    duplicate_groups: list[DuplicateGroupOut]
    total_duplicates: int
    documents_examined: int
    action: str = Field(description="Always preview: this tool never deletes anything.")

    @classmethod
    def of(cls, outcome: DedupeOutcome) -> Self:
        groups = [
            DuplicateGroupOut(
                primary_id=g.primary.id,
                primary_title=g.primary.title,
                duplicate_ids=[d.id for d in g.duplicates],
                duplicate_titles=[d.title for d in g.duplicates],
                avg_similarity=g.avg_similarity,
                differences=[DifferenceOut.of(d) for d in g.differences],
            )
            for g in outcome.groups
        ]
        return cls(
            duplicate_groups=groups,
            total_duplicates=outcome.total_duplicates,
            documents_examined=outcome.examined,
            action="preview",
        )
