"""Which document a ZIP container holds, judged by its members, and what a legacy Office file is.

EPUB and OpenDocument files name their type in a first member called `mimetype`; Office Open
XML files (Word, PowerPoint, Excel) in `[Content_Types].xml`, by the content type of their main
part. A name ending in .docx decides nothing: a ZIP of anything else is refused (415), and so is
a template or macro-enabled variant the readers cannot open (save it as a plain document). The
legacy binary formats (.doc, .ppt, .xls) are OLE compound files: refused with the format to
convert them to.
"""

from __future__ import annotations

import zipfile

from lxml import etree

from app.errors import UnsupportedMediaType
from app.ingest.parsing.limits import ParseLimits
from app.ingest.parsing.model import SourceType
from app.ingest.parsing.xmlsafe import parse
from app.ingest.parsing.zipped import open_zip, read_member

SUPPORTED = (
    "supported: PDF, Word (.docx), PowerPoint (.pptx), Excel (.xlsx), EPUB, "
    "OpenDocument text (.odt), HTML, markdown and plain text (UTF-8)"
)
_SMALL = ParseLimits(max_inflated_bytes=1024 * 1024)  # what sniffing inflates: small members

_MAIN_TYPES = {
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml": (
        SourceType.DOCX
    ),
    "application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml": (
        SourceType.PPTX
    ),
    "application/vnd.ms-powerpoint.presentation.macroEnabled.main+xml": SourceType.PPTX,
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml": (SourceType.XLSX),
    "application/vnd.openxmlformats-officedocument.spreadsheetml.template.main+xml": (
        SourceType.XLSX
    ),
    "application/vnd.ms-excel.sheet.macroEnabled.main+xml": SourceType.XLSX,
    "application/vnd.ms-excel.template.macroEnabled.main+xml": SourceType.XLSX,
}
# Main parts of variants the readers refuse: what to save them as instead.
_VARIANTS = {
    "wordprocessingml.template": "a Word template: save it as a Word document (.docx)",
    "ms-word.": "a macro-enabled Word file: save it as a Word document (.docx)",
    "presentationml.": "a PowerPoint show or template: save it as a presentation (.pptx)",
    "ms-powerpoint.": "a PowerPoint show or template: save it as a presentation (.pptx)",
    "ms-excel.sheet.binary": "an Excel binary workbook (.xlsb): save it as .xlsx",
}
_MIMETYPES = {
    "application/epub+zip": SourceType.EPUB,
    "application/vnd.oasis.opendocument.text": SourceType.ODT,
    "application/vnd.oasis.opendocument.text-template": SourceType.ODT,
}
_OLE_STREAMS = {  # the first stream found names the format: an encrypted package, then the rest
    "EncryptedPackage": (
        "a password-protected Office document: remove the password, save it, and upload that"
    ),
    "WordDocument": "a legacy Word document (.doc): save it as .docx (or PDF) and upload that",
    "PowerPoint Document": (
        "a legacy PowerPoint presentation (.ppt): save it as .pptx (or PDF) and upload that"
    ),
    "Workbook": "a legacy Excel workbook (.xls): save it as .xlsx and upload that",
    "Book": "a legacy Excel workbook (.xls): save it as .xlsx and upload that",
}


def container_type(data: bytes) -> SourceType:
    """The document a ZIP holds; 415 naming what it is otherwise, 413/422 for a broken or
    oversized directory."""
    with open_zip(data) as archive:
        names = set(archive.namelist())
        if "mimetype" in names:
            declared = read_member(archive, "mimetype", _SMALL).decode("ascii", "replace")
            return _by_mimetype(declared.strip())
        if "[Content_Types].xml" in names:
            return _by_main_part(archive)
    raise UnsupportedMediaType(f"the file is a ZIP archive, not a document; {SUPPORTED}")


def _by_mimetype(mimetype: str) -> SourceType:
    if found := _MIMETYPES.get(mimetype):
        return found
    if mimetype.startswith("application/vnd.oasis.opendocument."):
        kind = mimetype.rsplit(".", 1)[-1]
        raise UnsupportedMediaType(
            f"the file is an OpenDocument {kind}, not text: export it as PDF or save it in the "
            f"matching Office format; {SUPPORTED}"
        )
    raise UnsupportedMediaType(f"the file is a ZIP archive of {mimetype!r}; {SUPPORTED}")


def _by_main_part(archive: zipfile.ZipFile) -> SourceType:
    root = parse(read_member(archive, "[Content_Types].xml", _SMALL), name="[Content_Types].xml")
    declared = [
        str(element.get("ContentType") or "")
        for element in root.iter(etree.Element)
        if element.get("ContentType")
    ]
    for content_type in declared:
        if found := _MAIN_TYPES.get(content_type):
            return found
    for content_type in declared:
        if content_type.endswith((".main+xml", ".main")):
            for marker, advice in _VARIANTS.items():
                if marker in content_type:
                    raise UnsupportedMediaType(f"the file is {advice}; {SUPPORTED}")
    raise UnsupportedMediaType(
        f"the file is an Office Open XML package of no supported kind; {SUPPORTED}"
    )


def legacy_office(data: bytes) -> UnsupportedMediaType:
    """The refusal of an OLE compound file, naming the format when a stream name tells it."""
    for stream, what in _OLE_STREAMS.items():
        if stream.encode("utf-16-le") in data:
            return UnsupportedMediaType(f"the file is {what}; {SUPPORTED}")
    return UnsupportedMediaType(
        "the file is a legacy binary Microsoft Office file (.doc, .ppt, .xls): save it in the "
        f"current format (.docx, .pptx, .xlsx) and upload that; {SUPPORTED}"
    )
