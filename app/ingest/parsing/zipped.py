"""ZIP containers (Word, PowerPoint, Excel, EPUB, ODT) opened under the parse limits.

A ZIP of a few kilobytes can declare, or hold, gigabytes: a member of repeated bytes inflates a
thousandfold, and many directory entries can point at one compressed kernel. So a container is
vetted before a format reader sees it:

1. the central directory is read only when it is small (`MAX_DIRECTORY_BYTES`, from the
   end-of-central-directory record) and holds at most `MAX_MEMBERS` members;
2. the sizes it declares: each member at most `max_inflated_bytes`, all together at most
   `max_unzipped_bytes` (413 naming the limit, before anything is inflated);
3. every member is inflated as a stream and its bytes counted against the same limits
   (zipfile also stops a member at its declared size and then fails its CRC, so a member
   that lies about its size is corrupt: 422);
4. each XML member is walked as it streams in (xmlsafe.py): nesting, entity expansion, and
   the elements of a member the reader builds a tree of (all but those it `streams`).

The readers (python-docx, python-pptx, lxml) then open what was vetted.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import IO

from app.errors import PayloadTooLarge, Unprocessable
from app.ingest.parsing.limits import MB, ParseLimits
from app.ingest.parsing.xmlsafe import XmlVetting

MAX_MEMBERS = 10_000
MAX_DIRECTORY_BYTES = MAX_MEMBERS * 256
XML_SUFFIXES = (".xml", ".rels", ".opf", ".ncx", ".xhtml", ".html", ".htm")
_READ = 1024 * 1024
_EOCD = b"PK\x05\x06"
_ZIP64_LOCATOR = b"PK\x06\x07"
_ZIP64_EOCD = b"PK\x06\x06"
_BROKEN = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, NotImplementedError)


def open_zip(data: bytes) -> zipfile.ZipFile:
    """The archive with its directory read; 413 past the member limits, 422 when corrupt.

    Cheap whatever the file: the directory's size and count are checked before it is read."""
    entries, directory_bytes = _directory_size(data)
    if entries > MAX_MEMBERS or directory_bytes > MAX_DIRECTORY_BYTES:
        # a directory entry takes at least 46 bytes: the count a large directory can hold
        raise _too_many_members(entries if entries > MAX_MEMBERS else directory_bytes // 46)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (*_BROKEN, ValueError, OSError) as exc:
        raise Unprocessable(f"the ZIP container could not be read (corrupt?): {exc}") from None
    if len(archive.infolist()) > MAX_MEMBERS:
        raise _too_many_members(len(archive.infolist()))
    return archive


def vetted(
    data: bytes,
    limits: ParseLimits,
    *,
    lenient_xml: bool = False,
    watch: Callable[[bytes], None] | None = None,
    streams: Callable[[str], bool] | None = None,
) -> zipfile.ZipFile:
    """The archive after every member passed the limits (see the module's docstring);
    `lenient_xml` tolerates malformed XML (EPUB's XHTML), never deep nesting. `watch` sees
    every XML member's bytes as they are inflated, before they are vetted, and may refuse.
    The reader builds a tree of each XML member (its elements are counted) but those that
    `streams(name)` says it streams (a workbook's sheets, bounded by their rows)."""
    archive = open_zip(data)
    check_declared(archive, limits)
    total = 0
    for info in archive.infolist():
        total += _inflate(
            archive,
            info,
            limits,
            lenient_xml=lenient_xml,
            before=total,
            watch=watch,
            tree=streams is None or not streams(info.filename),
        )
    return archive


def check_declared(archive: zipfile.ZipFile, limits: ParseLimits) -> None:
    total = 0
    for info in archive.infolist():
        if info.file_size > limits.max_inflated_bytes:
            raise member_too_large(info.filename, limits)
        total += info.file_size
    if total > limits.max_unzipped_bytes:
        raise unzipped_too_large(limits)


def read_member(archive: zipfile.ZipFile, name: str, limits: ParseLimits) -> bytes:
    """One member's bytes, at most `max_inflated_bytes`; 422 when it is missing."""
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise Unprocessable(f"the file has no {name}: it is incomplete or corrupt") from None
    with _opened(archive, info) as stream:
        data = stream.read(limits.max_inflated_bytes + 1)
    if len(data) > limits.max_inflated_bytes:
        raise member_too_large(name, limits)
    return data


def _inflate(
    archive: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    limits: ParseLimits,
    *,
    lenient_xml: bool,
    before: int,
    watch: Callable[[bytes], None] | None = None,
    tree: bool = True,
) -> int:
    """Inflate one member as a stream, counting; XML goes through the vetting parser."""
    vetting = None
    if info.filename.lower().endswith(XML_SUFFIXES):
        vetting = XmlVetting(info.filename, limits, recover=lenient_xml, tree=tree)
    size = 0
    with _opened(archive, info) as stream:
        while chunk := stream.read(_READ):
            size += len(chunk)
            if size > limits.max_inflated_bytes:
                raise member_too_large(info.filename, limits)
            if before + size > limits.max_unzipped_bytes:
                raise unzipped_too_large(limits)
            if vetting is not None:
                if watch is not None:
                    watch(chunk)
                vetting.feed(chunk)
    if vetting is not None and size:
        vetting.close()
    return size


@contextmanager
def _opened(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[IO[bytes]]:
    try:
        with archive.open(info) as stream:
            yield stream
    except (*_BROKEN, RuntimeError) as exc:  # RuntimeError: an encrypted member
        raise Unprocessable(
            f"{info.filename} in the file could not be inflated (corrupt or encrypted?): {exc}"
        ) from None


def _directory_size(data: bytes) -> tuple[int, int]:
    """(members, directory bytes) as the end-of-central-directory record declares them."""
    start = data.rfind(_EOCD, max(0, len(data) - 22 - 65_535))
    if start < 0 or len(data) < start + 22:
        raise Unprocessable("the ZIP container has no central directory: it is truncated")
    entries, directory_bytes = struct.unpack_from("<HI", data, start + 10)
    locator = start - 20
    if locator >= 0 and data[locator : locator + 4] == _ZIP64_LOCATOR:
        (offset,) = struct.unpack_from("<Q", data, locator + 8)
        if data[offset : offset + 4] == _ZIP64_EOCD and len(data) >= offset + 48:
            entries, directory_bytes = struct.unpack_from("<QQ", data, offset + 32)
    return entries, directory_bytes


def _too_many_members(count: int) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"the ZIP container holds about {count:,} members, more than {MAX_MEMBERS:,}: "
        "no document needs that many parts",
        extra={"limit": "max_members", "value": MAX_MEMBERS},
    )


def member_too_large(name: str, limits: ParseLimits) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"{name} in the file inflates beyond {limits.max_inflated_bytes / MB:g} MB "
        "(RAG_PARSE_MAX_INFLATED_BYTES per member): split the document, or raise the limit",
        extra={"limit": "max_inflated_bytes", "value": limits.max_inflated_bytes},
    )


def unzipped_too_large(limits: ParseLimits) -> PayloadTooLarge:
    return PayloadTooLarge(
        f"the file's members inflate beyond {limits.max_unzipped_bytes / MB:g} MB together "
        "(RAG_PARSE_MAX_UNZIPPED_BYTES): split the document, or raise the limit",
        extra={"limit": "max_unzipped_bytes", "value": limits.max_unzipped_bytes},
    )
