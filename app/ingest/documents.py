"""Ingest one document: parse, chunk, embed what changed, store it in one transaction.

Idempotent by (collection, external_id). A chunk is embedded again only when the text that
is embedded (contextual header included) or the model changed; a document whose content
hash and model are unchanged is not written at all. Every failure (parser, embedder,
database) happens before or inside the single write transaction, so the previous version
stays as it was and no partial new version is ever visible.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio

from app.db.tenancy import SessionMaker, tenant_transaction
from app.embeddings import Embedder
from app.errors import Unprocessable
from app.ingest.chunking import ChunkDraft, Chunker, embedded_text
from app.ingest.parsing import ParsedDocument, SourceType, parse_bytes, parse_text
from app.ingest.store import (
    DEFAULT_COLLECTION,
    DocumentRow,
    StoredVersion,
    reusable_vectors,
    stored_version,
    write_version,
)

TITLE_FALLBACK_CHARS = 80


@dataclass(frozen=True, slots=True)
class PrecomputedChunk:
    """A chunk the caller embedded, with the model it declared."""

    content: str
    embedding: list[float]
    page_number: int | None = None
    section: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DocumentInput:
    content: str | bytes
    source_type: SourceType
    title: str | None = None
    external_id: str | None = None
    collection: str = DEFAULT_COLLECTION
    source_url: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    chunks: Sequence[PrecomputedChunk] | None = None
    embedding_model: str | None = None


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


@dataclass(frozen=True, slots=True)
class _Prepared:
    title: str
    drafts: list[ChunkDraft]
    texts: list[str]  # what gets embedded, one per draft
    hashes: list[str]


def sha256(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


async def ingest_document(
    sessions: SessionMaker,
    embedder: Embedder,
    *,
    chunker: Chunker,
    tenant_id: str,
    document: DocumentInput,
) -> IngestResult:
    _check_precomputed(document, embedder)
    prepared = await anyio.to_thread.run_sync(_prepare, document, chunker)
    external_id = document.external_id or sha256(document.content)
    content_hash = sha256(_fingerprint(document, prepared.title, embedder.model_id))
    async with tenant_transaction(sessions, tenant_id) as session:
        previous = await stored_version(
            session, collection=document.collection, external_id=external_id
        )
        if (
            previous
            and previous.content_hash == content_hash
            and previous.models <= {embedder.model_id}
        ):
            return _unchanged(previous, document, prepared, external_id)
        known = {}
        if previous and document.chunks is None:
            known = await reusable_vectors(
                session, previous.document_id, model_id=embedder.model_id, hashes=prepared.hashes
            )
    vectors, embedded = await _vectors(embedder, document, prepared, known)
    rows = [
        _chunk_row(draft, vector, text_hash, model_id=embedder.model_id, metadata=document.metadata)
        for draft, vector, text_hash in zip(prepared.drafts, vectors, prepared.hashes, strict=True)
    ]
    row = DocumentRow(
        tenant_id=tenant_id,
        collection=document.collection,
        external_id=external_id,
        title=prepared.title,
        source_type=document.source_type.value,
        source_url=document.source_url,
        metadata=document.metadata,
        content_hash=content_hash,
    )
    async with tenant_transaction(sessions, tenant_id) as session:
        document_id, created = await write_version(session, row, rows)
    return IngestResult(
        document_id=document_id,
        external_id=external_id,
        collection=document.collection,
        title=prepared.title,
        chunks=len(rows),
        embedded=embedded,
        unchanged=len(rows) - embedded,
        created=created,
        changed=True,
    )


def _check_precomputed(document: DocumentInput, embedder: Embedder) -> None:
    if document.chunks is None:
        return
    if document.embedding_model != embedder.model_id:
        raise Unprocessable(
            f"embedding_model {document.embedding_model!r} is not this service's model "
            f"{embedder.model_id!r}: a search never mixes vectors of two models",
            extra={"errors": [{"field": "embedding_model", "message": "model mismatch"}]},
        )
    for index, chunk in enumerate(document.chunks):
        if len(chunk.embedding) != embedder.dimensions:
            raise Unprocessable(
                f"chunks[{index}].embedding has {len(chunk.embedding)} dimensions, "
                f"the model {embedder.model_id!r} has {embedder.dimensions}",
                extra={"errors": [{"field": f"chunks.{index}.embedding", "message": "dimension"}]},
            )


def _prepare(document: DocumentInput, chunker: Chunker) -> _Prepared:
    """Parse and chunk (CPU-bound: runs in a worker thread)."""
    if document.chunks is not None:
        parsed = ParsedDocument(title=document.title, sections=[])
        drafts = [
            ChunkDraft(chunk.content, index, chunk.page_number, chunk.section, 0)
            for index, chunk in enumerate(document.chunks)
        ]
    else:
        parsed = _parse(document)
        drafts = chunker.split(parsed)
    title = document.title or parsed.title or _title_from(document, drafts)
    texts = [
        embedded_text(title=title, section_path=draft.section_path, content=draft.content)
        for draft in drafts
    ]
    return _Prepared(title, drafts, texts, [sha256(text) for text in texts])


def _parse(document: DocumentInput) -> ParsedDocument:
    if isinstance(document.content, bytes):
        return parse_bytes(document.content, document.source_type)
    return parse_text(document.content, document.source_type)


def _title_from(document: DocumentInput, drafts: list[ChunkDraft]) -> str:
    first = drafts[0].content.strip().splitlines()[0] if drafts else ""
    if len(first) > TITLE_FALLBACK_CHARS:
        first = first[:TITLE_FALLBACK_CHARS].rsplit(" ", 1)[0] + "…"
    return first or document.external_id or "Untitled"


def _fingerprint(document: DocumentInput, title: str, model_id: str) -> str:
    content = document.content if isinstance(document.content, str) else sha256(document.content)
    precomputed = [
        (c.content, c.page_number, c.section, sha256(json.dumps(c.embedding)))
        for c in document.chunks or ()
    ]
    return json.dumps(
        [
            content,
            document.source_type,
            title,
            document.source_url,
            document.metadata,
            precomputed,
            model_id,
        ],
        sort_keys=True,
        default=str,
    )


async def _vectors(
    embedder: Embedder,
    document: DocumentInput,
    prepared: _Prepared,
    known: dict[str, list[float]],
) -> tuple[list[list[float]], int]:
    """A vector per draft: the caller's, a stored one for the same text and model, or new."""
    if document.chunks is not None:
        return [list(chunk.embedding) for chunk in document.chunks], 0
    missing = sorted({h for h in prepared.hashes if h not in known})
    text_of = dict(zip(prepared.hashes, prepared.texts, strict=True))
    fresh = await embedder.embed_documents([text_of[h] for h in missing]) if missing else []
    by_hash = {**known, **dict(zip(missing, fresh, strict=True))}
    embedded = sum(1 for h in prepared.hashes if h not in known)
    return [by_hash[h] for h in prepared.hashes], embedded


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
        "metadata": metadata,  # the document's, on every chunk: filters need no join
    }


def _unchanged(
    previous: StoredVersion, document: DocumentInput, prepared: _Prepared, external_id: str
) -> IngestResult:
    return IngestResult(
        document_id=previous.document_id,
        external_id=external_id,
        collection=document.collection,
        title=prepared.title,
        chunks=previous.chunk_count,
        embedded=0,
        unchanged=previous.chunk_count,
        created=False,
        changed=False,
    )
