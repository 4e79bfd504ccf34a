"""Which parser a file needs, judged by its bytes: a name or a declared type only picks among
the text formats, so a `.pdf` name on text is text and a `.txt` name on a PNG is refused. A ZIP
container is judged by its members (containers.py)."""

from __future__ import annotations

import codecs
import re
from pathlib import PurePath

from app.errors import UnsupportedMediaType
from app.ingest.parsing.containers import SUPPORTED, container_type, legacy_office
from app.ingest.parsing.model import SourceType

_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"{\\rtf", "an RTF document"),
    (b"%!PS", "a PostScript file"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"II*\x00", "a TIFF image"),
    (b"MM\x00*", "a TIFF image"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"\xfd7zXZ\x00", "an xz archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"Rar!\x1a\x07", "a RAR archive"),
    (b"\x28\xb5\x2f\xfd", "a zstd archive"),
    (b"\x7fELF", "an ELF executable"),
    (b"SQLite format 3\x00", "an SQLite database"),
    (b"OggS", "an Ogg media file"),
)
_RIFF = {b"WEBP": "a WebP image", b"WAVE": "a WAV audio file", b"AVI ": "an AVI video"}
_SNIFF_BYTES = 8192
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)

# Leading whitespace, XML declarations and comments say nothing: markdown may start with them.
_PREAMBLE = re.compile(r"(?:\s*(?:<\?xml[^>]*>|<!--.*?-->))*\s*", re.DOTALL)
_HTML_START = re.compile(r"<(?:!doctype\s+html|html|head|body)[\s>/]", re.IGNORECASE)
_MARKDOWN_STRUCTURE = re.compile(r"^(?:\#{1,6}[ \t]+\S|```|~~~|\S[^\n]*\n=+[ \t]*$)", re.MULTILINE)
_HINTS = {
    "text/html": SourceType.HTML,
    "application/xhtml+xml": SourceType.HTML,
    "html": SourceType.HTML,
    "text/markdown": SourceType.MARKDOWN,
    "text/x-markdown": SourceType.MARKDOWN,
    "markdown": SourceType.MARKDOWN,
}
_SUFFIXES = {
    **dict.fromkeys(SourceType.HTML.suffixes, SourceType.HTML),
    **dict.fromkeys(SourceType.MARKDOWN.suffixes, SourceType.MARKDOWN),
}


def sniff_source_type(data: bytes, *, filename: str | None, declared: str | None) -> SourceType:
    """PDF by its `%PDF-` magic; a ZIP by its members (Word, PowerPoint, Excel, EPUB, ODT);
    415 for other binary formats (named when known, legacy Office ones with what to convert
    them to) and NUL bytes.

    Text is HTML when it starts like an HTML document; otherwise a declared type (`text/html`,
    `text/markdown`, with or without parameters) or the name's suffix (.html, .md …) decides;
    otherwise markdown when it has headings, code fences or setext titles, else plain text.
    """
    if data.startswith(b"%PDF-"):
        return SourceType.PDF
    if data.startswith(_ZIP_MAGIC):
        return container_type(data)
    if data.startswith(_OLE_MAGIC):
        raise legacy_office(data)
    _refuse_binary(data[:_SNIFF_BYTES])
    head = _head_text(data[:_SNIFF_BYTES])
    preamble = _PREAMBLE.match(head)
    if _HTML_START.match(head, preamble.end() if preamble else 0):
        return SourceType.HTML
    if hint := _hint(filename=filename, declared=declared):
        return hint
    if _MARKDOWN_STRUCTURE.search(head):
        return SourceType.MARKDOWN
    return SourceType.TEXT


def _refuse_binary(head: bytes) -> None:
    for magic, what in _MAGIC:
        if head.startswith(magic):
            raise UnsupportedMediaType(f"the file looks like {what}; {SUPPORTED}")
    if head[:4] == b"RIFF" and (media := _RIFF.get(head[8:12])):
        raise UnsupportedMediaType(f"the file looks like {media}; {SUPPORTED}")
    if head[4:8] == b"ftyp":
        raise UnsupportedMediaType(f"the file looks like an MP4/MOV/HEIC media file; {SUPPORTED}")
    if b"\x00" in head and not head.startswith(_UTF16_BOMS):
        raise UnsupportedMediaType(f"the file holds binary data (NUL bytes); {SUPPORTED}")


def _head_text(head: bytes) -> str:
    if head.startswith(_UTF16_BOMS):
        return head[: len(head) // 2 * 2].decode("utf-16", errors="replace")
    return head.decode("utf-8-sig", errors="replace")


def _hint(*, filename: str | None, declared: str | None) -> SourceType | None:
    media_type = (declared or "").split(";", 1)[0].strip().lower()
    if media_type in _HINTS:
        return _HINTS[media_type]
    return _SUFFIXES.get(PurePath(filename or "").suffix.lower())
