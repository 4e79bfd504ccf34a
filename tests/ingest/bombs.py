"""Hostile PDFs, built byte by byte: small files that cost a parser minutes or gigabytes."""

from __future__ import annotations

import zlib


def _pdf(objects: list[bytes]) -> bytes:
    """A PDF file of the numbered `objects` (1-based) with a valid cross-reference table."""
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


def _stream(data: bytes) -> bytes:
    packed = zlib.compress(data, 9)
    header = b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed)
    return header + packed + b"\nendstream"


def shared_stream_bomb(pages: int = 10, operators: int = 100_000) -> bytes:
    """Every page draws the same content stream of `operators` text-showing operators: a few
    kilobytes that take a text extractor seconds to minutes (3 KB of it are enough)."""
    content = b"BT /F1 12 Tf 72 720 Td " + b"(a) Tj " * operators + b"ET"
    page_numbers = range(4, 4 + pages)
    kids = b" ".join(b"%d 0 R" % n for n in page_numbers)
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
        _stream(content),
        *(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R"
            b" /Resources << /Font << /F1 << /Type /Font /Subtype /Type1"
            b" /BaseFont /Helvetica >> >> >> >>"
            for _ in page_numbers
        ),
    ]
    return _pdf(objects)


def inflation_bomb(inflated_bytes: int = 70_000_000) -> bytes:
    """One page whose content stream inflates from tens of kilobytes to `inflated_bytes` of
    spaces (72 KB that inflate to 70 MB by default)."""
    content = b"BT /F1 12 Tf 72 720 Td (x) Tj ET" + b" " * inflated_bytes
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [4 0 R] /Count 1 >>",
        _stream(content),
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R"
        b" /Resources << /Font << /F1 << /Type /Font /Subtype /Type1"
        b" /BaseFont /Helvetica >> >> >> >>",
    ]
    return _pdf(objects)
