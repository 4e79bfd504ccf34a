"""EPUB: the book's chapters in reading order, each chapter a section named by the table of
contents, the headings inside it below that name.

An EPUB is a ZIP of XHTML files listed by a package document (the `.opf` that
`META-INF/container.xml` points to): its spine is the reading order, its navigation document
(EPUB 3) or NCX (EPUB 2) names the chapters. Both are small XML read with lxml; each chapter's
XHTML is then read as the HTML uploads are (html.py, tables included), after lxml has
re-serialised it as HTML (so a self-closed `<script/>` swallows nothing). A file the contents
do not name continues the chapter before it. Chapters under DRM (listed in
`META-INF/encryption.xml`) cannot be read: 422.
"""

from __future__ import annotations

import dataclasses
import posixpath
import zipfile
from dataclasses import dataclass, field
from urllib.parse import unquote

from lxml import etree

from app.errors import Unprocessable
from app.ingest.parsing.html import parse_html
from app.ingest.parsing.limits import ParseLimits, too_many_chars
from app.ingest.parsing.model import ParsedDocument, Section, document
from app.ingest.parsing.xmlsafe import parse
from app.ingest.parsing.zipped import read_member, vetted

_CHAPTER_TYPES = {"application/xhtml+xml", "text/html", "text/x-oeb1-document"}
_FONT_OBFUSCATION = {"http://www.idpf.org/2008/embedding", "http://ns.adobe.com/pdf/enc#RC"}
_OPS_TYPE = "{http://www.idpf.org/2007/ops}type"


@dataclass
class _Package:
    title: str | None = None
    spine: list[str] = field(default_factory=list)  # chapter paths inside the ZIP
    nav: str | None = None  # the EPUB 3 navigation document
    ncx: str | None = None  # the EPUB 2 table of contents


def parse_epub(data: bytes, limits: ParseLimits) -> ParsedDocument:
    """One or more sections per chapter (split at its headings); the title is the package's
    dc:title."""
    with vetted(data, limits, lenient_xml=True) as archive:
        package = _package(archive, limits)
        _refuse_drm(archive, package, limits)
        toc = _toc(archive, package, limits)
        sections: list[Section] = []
        chapter: str | None = None
        chars = 0
        for path in package.spine:
            parsed = _chapter(read_member(archive, path, limits), path, limits)
            if parsed is None:
                continue
            chapter = toc.get(path) or chapter or parsed.title
            for section in parsed.sections:
                chars += len(section.text)
                if chars > limits.max_chars:
                    raise too_many_chars(limits)
                where = _path(chapter, section.section_path)
                sections.append(dataclasses.replace(section, section_path=where))
    return document(package.title, sections)


def _chapter(data: bytes, path: str, limits: ParseLimits) -> ParsedDocument | None:
    root = parse(data, name=path, recover=True)
    try:
        return parse_html(etree.tostring(root, method="html", encoding="unicode"), limits)
    except Unprocessable:
        return None  # a cover image, a blank page: no text


def _path(chapter: str | None, headings: tuple[str, ...]) -> tuple[str, ...]:
    if not chapter or (headings and _same(headings[0], chapter)):
        return headings
    return (" ".join(chapter.split()), *headings)


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def _package(archive: zipfile.ZipFile, limits: ParseLimits) -> _Package:
    container = _xml(archive, "META-INF/container.xml", limits)
    rootfile = next((e.get("full-path") for e in _named(container, "rootfile")), None)
    if not rootfile:
        raise Unprocessable("the EPUB names no package document: it is corrupt")
    opf = _xml(archive, rootfile, limits)
    base = posixpath.dirname(rootfile)
    manifest = {
        item.get("id"): (
            _join(base, item.get("href") or ""),
            item.get("media-type"),
            item.get("properties") or "",
        )
        for item in _named(opf, "item")
    }
    package = _Package(title=next((_words(e) for e in _named(opf, "title") if _words(e)), None))
    for ref in _named(opf, "itemref"):
        found = manifest.get(ref.get("idref"))
        if found and found[1] in _CHAPTER_TYPES:
            package.spine.append(found[0])
    package.nav = next((p for p, _, props in manifest.values() if "nav" in props.split()), None)
    toc_id = next((spine.get("toc") for spine in _named(opf, "spine")), None)
    package.ncx = manifest[toc_id][0] if toc_id in manifest else None
    return package


def _toc(archive: zipfile.ZipFile, package: _Package, limits: ParseLimits) -> dict[str, str]:
    """Chapter path -> its title in the table of contents (the first entry pointing at it)."""
    entries: list[tuple[str, str]] = []
    if package.nav and package.nav in archive.namelist():
        nav = _xml(archive, package.nav, limits)
        navs = list(_named(nav, "nav"))
        tocs = [n for n in navs if n.get(_OPS_TYPE) == "toc"] or navs[:1]
        base = posixpath.dirname(package.nav)
        for toc in tocs:
            entries += [(_join(base, a.get("href") or ""), _words(a)) for a in _named(toc, "a")]
    elif package.ncx and package.ncx in archive.namelist():
        ncx = _xml(archive, package.ncx, limits)
        base = posixpath.dirname(package.ncx)
        for point in _named(ncx, "navPoint"):
            label = next((_words(t) for t in _named(point, "text")), "")
            src = next((c.get("src") or "" for c in _named(point, "content")), "")
            entries.append((_join(base, src), label))
    titles: dict[str, str] = {}
    for path, title in entries:
        if title:
            titles.setdefault(path, title)
    return titles


def _refuse_drm(archive: zipfile.ZipFile, package: _Package, limits: ParseLimits) -> None:
    if "META-INF/encryption.xml" not in archive.namelist():
        return
    encryption = _xml(archive, "META-INF/encryption.xml", limits)
    for data in _named(encryption, "EncryptedData"):
        method = next((m.get("Algorithm") for m in _named(data, "EncryptionMethod")), None)
        uri = next((r.get("URI") for r in _named(data, "CipherReference")), None)
        if method not in _FONT_OBFUSCATION and uri and unquote(uri) in package.spine:
            raise Unprocessable("the EPUB's chapters are encrypted (DRM): it cannot be read")


def _xml(archive: zipfile.ZipFile, name: str, limits: ParseLimits) -> etree._Element:
    return parse(read_member(archive, name, limits), name=name, recover=True)


def _named(root: etree._Element, localname: str) -> list[etree._Element]:
    """Descendants by local name, whatever their namespace (books get those wrong)."""
    return [e for e in root.iter(etree.Element) if etree.QName(e).localname == localname]


def _join(base: str, href: str) -> str:
    """A reference relative to `base` as a path inside the ZIP, without its #fragment."""
    return posixpath.normpath(posixpath.join(base, unquote(href.split("#", 1)[0])))


def _words(element: etree._Element) -> str:
    return " ".join("".join(element.itertext()).split())
