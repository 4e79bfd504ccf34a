"""XML inside uploaded containers, parsed without the XML features that attack a reader.

Every parser here loads no DTD, resolves no external entity, never touches the network and
keeps libxml2's caps (no `huge_tree`: an entity that expands a thousandfold, the "billion
laughs", is a parse error). `XmlVetting` walks a member as it streams in, building no tree, and
refuses nesting deeper than `max_xml_depth` (a few kilobytes of `<a><a><a>…` would otherwise
cost gigabytes in a tree, and recursion in a reader) and, in a member a reader will build a
tree of, more than `max_xml_elements` elements (tens of kilobytes of `<text:s/>` inflate to
millions of them, hundreds of megabytes as a tree); the readers build trees only of members
it passed (zipped.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lxml import etree

from app.errors import PayloadTooLarge, Unprocessable
from app.ingest.parsing.limits import ParseLimits


def parser(*, recover: bool = False) -> etree.XMLParser:
    """A tree-building parser with no DTD, entity or network access; `recover` tolerates the
    errors of sloppy XHTML (an undeclared `&nbsp;`) as browsers do."""
    return etree.XMLParser(
        resolve_entities=False,
        load_dtd=False,
        no_network=True,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
        recover=recover,
    )


def parse(data: bytes, *, name: str, recover: bool = False) -> etree._Element:
    """The root of a vetted member; 422 when it is not well-formed XML."""
    try:
        root = etree.fromstring(data, parser(recover=recover))
    except etree.XMLSyntaxError as exc:
        raise malformed(name, exc) from None
    if root is None:  # recover mode on a member with no element at all
        raise Unprocessable(f"{name} in the file holds no XML element")
    return root


def malformed(name: str, exc: etree.XMLSyntaxError) -> Unprocessable:
    return Unprocessable(f"{name} in the file is not well-formed XML ({exc.msg}): it is corrupt")


class TooDeep(Exception):
    """Raised from inside the parser's callbacks; `XmlVetting` turns it into a 422."""


class TooMany(Exception):
    """Raised from inside the parser's callbacks; `XmlVetting` turns it into a 413."""


if TYPE_CHECKING:  # a protocol of the type stubs alone
    _Target = etree.ParserTarget[None]
else:
    _Target = object


class _Shape(_Target):
    """A parser target that only counts (depth, and elements up to `elements`, None: not
    counted): no tree is built."""

    def __init__(self, depth: int, elements: int | None) -> None:
        self.limit, self.elements_limit = depth, elements
        self.depth = self.elements = 0

    def start(self, tag: str, attrib: dict[str, str], /) -> None:
        self.depth += 1
        if self.depth > self.limit:
            raise TooDeep
        self.elements += 1
        if self.elements_limit is not None and self.elements > self.elements_limit:
            raise TooMany

    def end(self, tag: str, /) -> None:
        self.depth -= 1

    def close(self) -> None:
        return None


class XmlVetting:
    """Feed a member's bytes as they are inflated; 422 naming `max_xml_depth` when elements
    nest deeper, or when the member is not XML (unless `recover`); for a member read as a
    `tree`, 413 naming `max_xml_elements` when it holds more elements."""

    def __init__(
        self, name: str, limits: ParseLimits, *, recover: bool = False, tree: bool = True
    ) -> None:
        self._name = name
        self._limit = limits.max_xml_depth
        self._elements = limits.max_xml_elements
        self._parser = etree.XMLParser(
            target=_Shape(self._limit, self._elements if tree else None),
            resolve_entities=False,
            load_dtd=False,
            no_network=True,
            huge_tree=False,
            recover=recover,
        )

    def feed(self, data: bytes) -> None:
        try:
            self._parser.feed(data)
        except TooDeep:
            raise self._too_deep() from None
        except TooMany:
            raise self._too_many() from None
        except etree.XMLSyntaxError as exc:
            raise malformed(self._name, exc) from None

    def close(self) -> None:
        try:
            self._parser.close()
        except TooDeep:
            raise self._too_deep() from None
        except TooMany:
            raise self._too_many() from None
        except etree.XMLSyntaxError as exc:
            raise malformed(self._name, exc) from None

    def _too_many(self) -> PayloadTooLarge:
        return PayloadTooLarge(
            f"{self._name} in the file holds more than {self._elements:,} XML elements "
            "(RAG_PARSE_MAX_XML_ELEMENTS): split the document, or raise the limit",
            extra={"limit": "max_xml_elements", "value": self._elements},
        )

    def _too_deep(self) -> Unprocessable:
        return Unprocessable(
            f"{self._name} in the file nests XML elements more than {self._limit:,} deep "
            "(RAG_PARSE_MAX_XML_DEPTH): it is malformed or built to exhaust a reader",
            extra={"limit": "max_xml_depth", "value": self._limit},
        )
