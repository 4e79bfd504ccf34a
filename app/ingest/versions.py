"""A document on its way through an ingestion batch (`Pending`), the new version written for
it (its document row and chunk rows, each chunk with its vector and the hash of the text it was
embedded from) and what the caller is told (`IngestResult`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from app.ingest.chunking import OCR_FLAG, ChunkDraft
from app.ingest.inputs import DocumentInput, Prepared
from app.ingest.store import DocumentKey, DocumentRow, NewVersion, StoredVersion, Written


@dataclass(frozen=True, slots=True)
class IngestResult:
    document_id: uuid.UUID
    external_id: str
    collection: str
    title: str
    chunks: int
    embedded: int
    unchanged: int
    created: bool
    changed: bool
    access: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Pending:
    """A document on its way through a batch."""

    index: int  # in the caller's list
    document: DocumentInput
    prepared: Prepared
    external_id: str
    content_hash: str

    @property
    def key(self) -> DocumentKey:
        return (self.document.collection, self.external_id, self.document.access)


def new_version(item: Pending, vectors: dict[str, list[float]], model_id: str) -> NewVersion:
    document, prepared = item.document, item.prepared
    if document.chunks is not None:
        chosen = [list(chunk.embedding) for chunk in document.chunks]
    else:
        chosen = [vectors[h] for h in prepared.hashes]
    rows = [
        _chunk_row(draft, vector, text_hash, model_id=model_id, metadata=document.metadata)
        for draft, vector, text_hash in zip(prepared.drafts, chosen, prepared.hashes, strict=True)
    ]
    row = DocumentRow(
        collection=document.collection,
        external_id=item.external_id,
        title=prepared.title,
        source_type=document.source_type.value,
        source_url=document.source_url,
        metadata=document.metadata,
        content_hash=item.content_hash,
        access=document.access,
        version=document.version,
    )
    return NewVersion(row, rows)


def _chunk_row(
    draft: ChunkDraft,
    vector: list[float],
    text_hash: str,
    *,
    model_id: str,
    metadata: dict[str, Any],
) -> dict[str, Any]:
    return {
        "id": uuid.uuid4(),
        "chunk_index": draft.chunk_index,
        "content": draft.content,
        "page_number": draft.page_number,
        "section_path": list(draft.section_path),
        "token_count": draft.token_count,
        "embedding": vector,
        "embedding_model": model_id,
        "embedded_text_hash": text_hash,
        # the document's, on every chunk (filters need no join); "ocr": true on text read by OCR
        "metadata": {**metadata, OCR_FLAG: True} if draft.ocr else metadata,
    }


def unchanged_result(previous: StoredVersion, item: Pending) -> IngestResult:
    return IngestResult(
        document_id=previous.document_id,
        external_id=item.external_id,
        collection=item.document.collection,
        title=item.prepared.title,
        chunks=previous.chunk_count,
        embedded=0,
        unchanged=previous.chunk_count,
        created=False,
        changed=False,
        access=item.document.access,
    )


def written_result(item: Pending, written: Written, known: dict[str, list[float]]) -> IngestResult:
    chunks = len(item.prepared.drafts)
    embedded = 0
    if item.document.chunks is None:
        embedded = sum(1 for h in item.prepared.hashes if h not in known)
    return IngestResult(
        document_id=written.document_id,
        external_id=item.external_id,
        collection=item.document.collection,
        title=item.prepared.title,
        chunks=chunks,
        embedded=embedded,
        unchanged=chunks - embedded,
        created=written.created,
        changed=True,
        access=item.document.access,
    )
