"""A file as every door takes it (an HTTP upload, a job's file, `rag ingest`'s file on disk):
its size within the door's cap, not empty, its type sniffed from the content (never trusted
from the name), and the document input it becomes."""

from __future__ import annotations

from typing import Any, Protocol

from app.errors import PayloadTooLarge, Unprocessable
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import sniff_source_type

READ_CHUNK = 1024 * 1024
UPLOAD_LIMIT = "RAG_UPLOAD_MAX_BYTES"


class Readable(Protocol):
    async def read(self, size: int = -1) -> bytes: ...


def check_size(size: int, limit: int, setting: str = UPLOAD_LIMIT) -> None:
    """413 when a file of `size` bytes is over `limit` (the setting that sets it named)."""
    if size > limit:
        raise PayloadTooLarge(f"the file is larger than {limit} bytes ({setting})")


async def read_capped(file: Readable, limit: int, setting: str = UPLOAD_LIMIT) -> bytes:
    """A file's bytes, read no further than `limit`; 413 past it, 422 when empty."""
    data = bytearray()
    while chunk := await file.read(READ_CHUNK):
        data.extend(chunk)
        check_size(len(data), limit, setting)
    return not_empty(bytes(data))


def not_empty(data: bytes) -> bytes:
    if not data:
        raise Unprocessable("the file is empty")
    return data


def file_input(
    data: bytes, *, filename: str | None, declared: str | None = None, **fields: Any
) -> DocumentInput:
    """The document a file's bytes become, its type sniffed (415 for a format not read)."""
    source_type = sniff_source_type(data, filename=filename, declared=declared)
    return DocumentInput(content=data, source_type=source_type, **fields)
