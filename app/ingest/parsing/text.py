"""Turning bytes into clean text, and plain text into a document."""

from __future__ import annotations

import codecs

from app.errors import Unprocessable
from app.ingest.parsing.model import ParsedDocument, Section, document

_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)


def decode_text(data: bytes) -> str:
    """UTF-8 (a leading BOM dropped), or UTF-16 when it starts with a BOM; anything else is 422."""
    encoding = "utf-16" if data.startswith(_UTF16_BOMS) else "utf-8-sig"
    if encoding == "utf-8-sig" and b"\x00" in data:
        raise Unprocessable("the file holds NUL bytes: it looks like binary data, not text")
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        where = f"byte 0x{data[exc.start]:02x} at offset {exc.start}"
        raise Unprocessable(
            f"the file is not valid {encoding.removesuffix('-sig').upper()} text ({where}); "
            "save it as UTF-8"
        ) from None
    return clean_text(text)


def clean_text(text: str) -> str:
    """Unix newlines; 422 for what PostgreSQL text cannot hold (NUL, lone surrogates)."""
    if "\x00" in text:
        raise Unprocessable("the text contains NUL characters")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise Unprocessable("the text contains invalid Unicode (unpaired surrogates)") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def parse_plain(text: str) -> ParsedDocument:
    """Plain text is one untitled section; the chunker finds paragraphs and sentences in it."""
    return document(None, [Section(text=text.strip(), section_path=(), page_number=None)])
