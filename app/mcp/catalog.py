"""MCP resources an agent can browse: the tenant's collections, one collection, one document.

    rag://collections              every collection with its document and chunk counts
    rag://collections/{name}       one collection: its counts and latest documents
    rag://documents/{document_id}  one document's text and citation (what `fetch` gives)

Collection names are percent-encoded in URIs. Reads pass the same gate as tool calls.
"""

from __future__ import annotations

import uuid
from typing import Self
from urllib.parse import quote

from pydantic import BaseModel, Field

from app.errors import NotFound
from app.ingest.catalog import DocumentSummary
from app.mcp.access import admitted, resource_errors
from app.mcp.models import FetchedItem, citation_url
from app.operations import documents

LATEST_DOCUMENTS = 50


def collection_uri(name: str) -> str:
    return f"rag://collections/{quote(name, safe='')}"


class CollectionEntry(BaseModel):
    name: str
    uri: str = Field(description="This collection's resource.")
    documents: int
    chunks: int


class CollectionList(BaseModel):
    collections: list[CollectionEntry]
    total_documents: int


class DocumentEntry(BaseModel):
    id: uuid.UUID = Field(description="The document's id (for `fetch`).")
    title: str
    source_type: str
    chunks: int
    url: str

    @classmethod
    def of(cls, summary: DocumentSummary) -> Self:
        doc = summary.document
        return cls(
            id=doc.id,
            title=doc.title,
            source_type=doc.source_type,
            chunks=doc.chunk_count,
            url=citation_url(doc.id, doc.source_url),
        )


class CollectionDetail(CollectionEntry):
    latest: list[DocumentEntry] = Field(
        description=f"The {LATEST_DOCUMENTS} most recently ingested documents."
    )


@resource_errors
async def collections() -> CollectionList:
    access = await admitted()
    counts = await documents.collections(access.resources.sessions, access.caller.tenant_id)
    entries = [
        CollectionEntry(
            name=c.name, uri=collection_uri(c.name), documents=c.documents, chunks=c.chunks
        )
        for c in counts
    ]
    return CollectionList(collections=entries, total_documents=sum(c.documents for c in counts))


@resource_errors
async def collection(name: str) -> CollectionDetail:
    access = await admitted()
    sessions, tenant_id = access.resources.sessions, access.caller.tenant_id
    found = [c for c in await documents.collections(sessions, tenant_id) if c.name == name]
    if not found:
        raise NotFound(f"no collection named {name!r}")
    latest, _total = await documents.documents(
        sessions, tenant_id, collection=name, limit=LATEST_DOCUMENTS
    )
    [counts] = found
    return CollectionDetail(
        name=name,
        uri=collection_uri(name),
        documents=counts.documents,
        chunks=counts.chunks,
        latest=[DocumentEntry.of(summary) for summary in latest],
    )


@resource_errors
async def document(document_id: str) -> FetchedItem:
    access = await admitted()
    try:
        item_id = uuid.UUID(document_id)
    except ValueError:
        raise NotFound(f"no document with id {document_id}") from None
    item = await documents.fetch(access.resources.sessions, access.caller.tenant_id, item_id)
    if item.kind != "document":
        raise NotFound(f"no document with id {document_id}")
    return FetchedItem.of(item)
