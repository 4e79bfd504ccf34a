"""How `rag ingest --url` packs files into requests: text files (plain, markdown, HTML) go
as JSON documents in batches (POST /api/rag/documents/batch), so a folder of notes costs a
few requests of the tenant's rate limit instead of one per file; a PDF, a file that is not
text the service can read, an empty one or one too large for a batch goes alone as an upload
(POST /api/rag/documents/upload), where the service gives its own verdict on it.

A file's type and text are found with the service's own functions (app/ingest/parsing), so a
document sent in a batch is stored as its upload would have been, `filename` metadata
included."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from rag_client import NewDocument
from rag_client import SourceType as DocumentType

from app.cli.files import SourceFile, content_version
from app.errors import AppError
from app.ingest.parsing import SourceType, sniff_source_type
from app.ingest.parsing.html import decode_html
from app.ingest.parsing.text import decode_text

BATCH_FILES = 32
# The JSON of one batch stays within the smallest request body any service accepts
# (RAG_UPLOAD_MAX_BYTES is at least 1 KiB, and 64 KiB more is allowed for framing), and its
# embedding within the client's timeout even on a CPU.
BATCH_BYTES = 64 * 1024


@dataclass(frozen=True, slots=True)
class Outgoing:
    """A file as it will be sent: a JSON `document` for a batch, or None for an upload."""

    file: SourceFile
    document: NewDocument | None
    size: int  # bytes of JSON it adds to a batch


def outgoing(file: SourceFile, *, collection: str | None, access: Sequence[str]) -> Outgoing:
    """Read `file` and choose how it goes; OSError when it cannot be read."""
    data = file.path.read_bytes()
    text = _text(data, name=file.path.name)
    if text is None:
        return Outgoing(file, None, 0)
    content, source_type = text
    document = NewDocument(
        content=content,
        external_id=file.external_id,
        collection=collection,
        source_type=DocumentType(source_type.value),
        metadata={"filename": file.path.name},
        access=list(access),
        version=content_version(data),
    )
    size = len(json.dumps(document.model_dump(mode="json", exclude_none=True)))
    if size > BATCH_BYTES:
        return Outgoing(file, None, 0)
    return Outgoing(file, document, size)


def requests(items: Iterable[Outgoing]) -> Iterator[list[Outgoing]]:
    """The files in the order given, grouped into requests: a batch of documents, or one
    upload (a list of one whose `document` is None)."""
    batch: list[Outgoing] = []
    size = 0
    for item in items:
        if item.document is None:
            yield [item]
            continue
        if batch and (len(batch) >= BATCH_FILES or size + item.size > BATCH_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(item)
        size += item.size
    if batch:
        yield batch


def _text(data: bytes, *, name: str) -> tuple[str, SourceType] | None:
    """The text and type the service would read from these bytes, or None when they are for
    the service to judge (a PDF, binary, not UTF-8, empty)."""
    if not data:
        return None
    try:
        source_type = sniff_source_type(data, filename=name, declared=None)
        if source_type is SourceType.PDF:
            return None
        content = decode_html(data) if source_type is SourceType.HTML else decode_text(data)
    except AppError:
        return None
    return content, source_type
