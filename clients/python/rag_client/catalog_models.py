"""Typed replies of browsing: who a token is, the formats, the collections, one document's
chunks."""

from __future__ import annotations

import uuid
from datetime import datetime

from rag_client.models import CitationStyle, Document, Reply, SourceType


class Identity(Reply):
    """Who the token is (GET /api/rag/me)."""

    tenant_id: str
    tenant_tier: str
    subject: str
    scopes: list[str]
    groups: list[str]
    expires_at: datetime | None


class Format(Reply):
    """A format ingest reads (GET /api/rag/formats)."""

    source_type: SourceType
    label: str
    suffixes: list[str]
    file_only: bool  # uploaded as a file only, never sent as text


class FormatList(Reply):
    items: list[Format]


class Collection(Reply):
    name: str
    documents: int
    chunks: int


class CollectionList(Reply):
    items: list[Collection]


class StoredChunk(Reply):
    chunk_id: uuid.UUID
    chunk_index: int
    content: str
    page_number: int | None
    section: list[str]
    token_count: int
    citation: str  # this chunk's own source in the style asked for


class DocumentChunks(Reply):
    """A page of one document's chunks in reading order, with the document's citation."""

    document: Document
    citation: str | None
    style: CitationStyle
    chunks: list[StoredChunk]
    total: int
    limit: int
    offset: int
