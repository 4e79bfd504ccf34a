"""What a caller hands in (`DocumentInput`, with `PrecomputedChunk`s when it embedded them
itself) and how it is prepared for ingestion (documents.py): checked, parsed, chunked, titled,
with the text each chunk is embedded as and that text's hash, and the fingerprint that tells
an unchanged version from a new one. CPU-bound: ingestion runs `prepare_all` in a worker
thread."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.embeddings import Embedder
from app.errors import AppError, Unprocessable
from app.ingest.allowance import ChunkAllowance
from app.ingest.chunking import ChunkDraft, Chunker, embedded_text
from app.ingest.parsing import ParsedDocument, Parser, SourceType
from app.ingest.store import DEFAULT_COLLECTION

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
    access: tuple[str, ...] = ()  # normalized (app/permissions.py); empty: every member
    version: str | None = None  # the source's own revision (an etag, a time, a commit)


@dataclass(frozen=True, slots=True)
class Prepared:
    title: str
    drafts: list[ChunkDraft]
    texts: list[str]  # what gets embedded, one per draft
    hashes: list[str]


def sha256(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def prepare_all(
    documents: Sequence[DocumentInput],
    chunker: Chunker,
    embedder: Embedder,
    parser: Parser,
    *,
    allowance: ChunkAllowance | None = None,
) -> list[Prepared | AppError]:
    """Check, parse and chunk every document (CPU-bound: runs in a worker thread); the chunks
    they make are taken from `allowance` (allowance.py) when there is one."""
    out: list[Prepared | AppError] = []
    for document in documents:
        try:
            _check_precomputed(document, embedder)
            out.append(prepare(document, chunker, parser, allowance=allowance))
        except AppError as error:
            out.append(error)
    return out


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


def prepare(
    document: DocumentInput,
    chunker: Chunker,
    parser: Parser,
    *,
    allowance: ChunkAllowance | None = None,
) -> Prepared:
    """Parse and chunk (CPU-bound: runs in a worker thread); 413 when the chunks do not fit
    in `allowance`, before chunking when the tokens alone say so."""
    if document.chunks is not None:
        parsed = ParsedDocument(title=document.title, sections=[])
        drafts = [
            ChunkDraft(chunk.content, index, chunk.page_number, chunk.section, 0)
            for index, chunk in enumerate(document.chunks)
        ]
    else:
        parsed = parser.parse(document.content, document.source_type)
        if allowance is not None:
            allowance.expect(chunker.fewest_chunks(parsed))
        drafts = chunker.split(parsed)
        if allowance is not None:
            allowance.take(len(drafts))
    title = document.title or parsed.title or _title_from(document, drafts)
    texts = [
        embedded_text(title=title, section_path=draft.section_path, content=draft.content)
        for draft in drafts
    ]
    return Prepared(title, drafts, texts, [sha256(text) for text in texts])


def _title_from(document: DocumentInput, drafts: list[ChunkDraft]) -> str:
    first = drafts[0].content.strip().splitlines()[0] if drafts else ""
    if len(first) > TITLE_FALLBACK_CHARS:
        first = first[:TITLE_FALLBACK_CHARS].rsplit(" ", 1)[0] + "…"
    return first or document.external_id or "Untitled"


def fingerprint(document: DocumentInput, title: str, model_id: str) -> str:
    """What a document's content hash is made of. Its content counts by its bytes (a text by
    its UTF-8): the same file sent as JSON text, uploaded or read from disk is one content."""
    content = sha256(document.content)
    precomputed = [
        (c.content, c.page_number, c.section, _vector_hash(c.embedding))
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
            document.version,
        ],
        sort_keys=True,
        default=str,
    )


def _vector_hash(vector: Sequence[float]) -> str:
    """As stored (float4): fast, where hashing its JSON cost ~0.3 ms per 384-d vector."""
    return hashlib.sha256(np.asarray(vector, dtype=np.float32).tobytes()).hexdigest()
