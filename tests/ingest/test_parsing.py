"""Parsing each format into sections, and sniffing what an upload is."""

from __future__ import annotations

import codecs
import time

import pytest
from fpdf import FPDF

from app.errors import AppError, Unprocessable, UnsupportedMediaType
from app.ingest.parsing import (
    ParsedDocument,
    ParseLimits,
    Parser,
    SourceType,
    parse_bytes,
    parse_text,
    sniff_source_type,
)
from app.ingest.parsing.files import read_file


def _pdf(
    pages: list[str],
    *,
    title: str | None = None,
    owner_password: str | None = None,
    user_password: str | None = None,
) -> bytes:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    if title:
        pdf.set_title(title)
    if owner_password:
        pdf.set_encryption(owner_password=owner_password, user_password=user_password)
    for text in pages:
        pdf.add_page()
        if text:
            pdf.multi_cell(0, 10, text)
    return bytes(pdf.output())


def _refused(error: type[AppError], call: object, *args: object) -> AppError:
    assert callable(call)
    with pytest.raises(error) as caught:
        call(*args)
    return caught.value


def _paths(parsed: ParsedDocument) -> list[tuple[str, ...]]:
    return [section.section_path for section in parsed.sections]


# PDF


def test_pdf_sections_carry_their_page_numbers() -> None:
    data = _pdf(["Aardvark lives here.", "Bumblebee lives here.", "Chameleon lives here."])
    parsed = parse_bytes(data, SourceType.PDF)
    assert [(s.page_number, s.text) for s in parsed.sections] == [
        (1, "Aardvark lives here."),
        (2, "Bumblebee lives here."),
        (3, "Chameleon lives here."),
    ]
    assert all(section.section_path == () for section in parsed.sections)


def test_pdf_pages_without_text_are_skipped_but_keep_the_numbering() -> None:
    parsed = parse_bytes(_pdf(["first page", "", "third page"]), SourceType.PDF)
    assert [s.page_number for s in parsed.sections] == [1, 3]


def test_pdf_title_comes_from_its_metadata() -> None:
    parsed = parse_bytes(_pdf(["Some heading\nbody"], title="Quarterly Figures"), SourceType.PDF)
    assert parsed.title == "Quarterly Figures"


def test_pdf_title_falls_back_to_a_heading_like_first_line() -> None:
    parsed = parse_bytes(_pdf(["Annual Report 2024\nRevenue grew."]), SourceType.PDF)
    assert parsed.title == "Annual Report 2024"


def test_pdf_title_is_not_a_first_sentence() -> None:
    parsed = parse_bytes(_pdf(["Revenue grew a lot this year.\nMore."]), SourceType.PDF)
    assert parsed.title is None


def test_pdf_needing_a_password_is_refused() -> None:
    data = _pdf(["secret"], owner_password="owner", user_password="user")
    error = _refused(Unprocessable, parse_bytes, data, SourceType.PDF)
    assert "encrypted" in error.detail


def test_pdf_with_only_an_owner_password_opens_like_in_a_viewer() -> None:
    data = _pdf(["restricted but readable"], owner_password="owner")
    parsed = parse_bytes(data, SourceType.PDF)
    assert parsed.sections[0].text == "restricted but readable"


@pytest.mark.parametrize(
    "data",
    [
        _pdf(["one", "two", "three"])[:600],
        b"%PDF-1.7\n" + bytes(range(256)) * 8,
        b"%PDF-",
    ],
    ids=["truncated", "garbage", "header-only"],
)
def test_corrupt_pdf_is_refused(data: bytes) -> None:
    error = _refused(Unprocessable, parse_bytes, data, SourceType.PDF)
    assert "could not be read" in error.detail


def test_pdf_without_a_text_layer_is_refused() -> None:
    pdf = FPDF()
    pdf.add_page()
    pdf.rect(10, 10, 50, 50)  # a drawing, as a scan would be an image: no text
    error = _refused(Unprocessable, parse_bytes, bytes(pdf.output()), SourceType.PDF)
    assert "no text layer" in error.detail


def test_pdf_cannot_be_sent_as_text() -> None:
    _refused(UnsupportedMediaType, parse_text, "%PDF-1.7 ...", SourceType.PDF)


# Markdown

_GUIDE = """\
---
title: front matter is not content
---
Read this first.

# Guide

## Install

Steps here.

### Linux

```bash
# a comment, not a heading
apt install thing
```

> # a quoted heading stays text

## Usage *now*
Use it.
"""


def test_markdown_headings_become_section_paths() -> None:
    parsed = parse_text(_GUIDE, SourceType.MARKDOWN)
    assert parsed.title == "Guide"
    assert _paths(parsed) == [
        (),
        ("Guide", "Install"),
        ("Guide", "Install", "Linux"),
        ("Guide", "Usage now"),
    ]
    assert parsed.sections[0].text == "Read this first."
    assert all(section.page_number is None for section in parsed.sections)


def test_markdown_code_blocks_stay_text_and_hide_no_headings() -> None:
    linux = parse_text(_GUIDE, SourceType.MARKDOWN).sections[2]
    assert "# a comment, not a heading\napt install thing" in linux.text
    assert "```bash" in linux.text
    assert "> # a quoted heading stays text" in linux.text


def test_markdown_setext_headings_count_and_a_later_h1_starts_a_new_path() -> None:
    parsed = parse_text(
        "One\n===\n\nalpha\n\n## Sub\n\nbeta\n\n# Two\n\ngamma\n", SourceType.MARKDOWN
    )
    assert parsed.title == "One"
    assert _paths(parsed) == [("One",), ("One", "Sub"), ("Two",)]


def test_markdown_without_headings_is_one_untitled_section() -> None:
    parsed = parse_bytes(b"just a paragraph\n\nand another", SourceType.MARKDOWN)
    assert parsed.title is None
    assert _paths(parsed) == [()]


# HTML

_PAGE = """<!DOCTYPE html>
<html><head><title>The  Page</title><style>.x { color: red }</style>
<script>var tracking = 1;</script></head>
<body>
<header><a href="/">Home</a> Site banner</header>
<nav><ul><li>Menu item</li></ul></nav>
<main><article>
<header><h1>Article <em>Title</em></h1></header>
<p>First   paragraph
spans lines.</p>
<h2>Install</h2><p>Run the installer.</p>
<pre>  indented
    code</pre>
<h3>Linux</h3><ul><li>apt</li><li>dnf</li></ul>
<h2>Usage</h2><!-- a comment --><p>Use it.<script>evil()</script></p>
<form><input value="x">Log in</form>
<noscript>Enable JavaScript</noscript>
</article></main>
<aside>Advertisement</aside>
<footer>Copyright notice</footer>
</body></html>"""


def test_html_headings_become_section_paths_and_title() -> None:
    parsed = parse_text(_PAGE, SourceType.HTML)
    assert parsed.title == "The Page"
    assert _paths(parsed) == [
        ("Article Title",),
        ("Article Title", "Install"),
        ("Article Title", "Install", "Linux"),
        ("Article Title", "Usage"),
    ]
    assert parsed.sections[0].text == "First paragraph spans lines."
    assert parsed.sections[2].text == "apt\n\ndnf"


def test_html_page_furniture_scripts_and_forms_are_dropped() -> None:
    text = "\n".join(s.text for s in parse_text(_PAGE, SourceType.HTML).sections)
    for dropped in ("tracking", "color", "Home", "banner", "Menu", "evil", "Log in", "JavaScript"):
        assert dropped not in text
    for dropped in ("Advertisement", "Copyright", "comment"):
        assert dropped not in text


def test_html_pre_keeps_its_whitespace() -> None:
    install = parse_text(_PAGE, SourceType.HTML).sections[1]
    assert install.text == "Run the installer.\n\n  indented\n    code"


def test_html_title_falls_back_to_the_first_h1() -> None:
    parsed = parse_text("<body><h1>Only Heading</h1><p>text</p></body>", SourceType.HTML)
    assert parsed.title == "Only Heading"


def test_an_xhtml_page_with_an_xml_declaration_keeps_its_text() -> None:
    page = (
        "<?xml version='1.0' encoding='iso-8859-1'?>"
        "<html xmlns='http://www.w3.org/1999/xhtml'><body><p>café</p></body></html>"
    )
    assert parse_text(page, SourceType.HTML).sections[0].text == "café"


def test_html_bytes_in_a_declared_legacy_charset_are_decoded() -> None:
    page = '<html><head><meta charset="iso-8859-1"></head><body><p>café crème</p></body></html>'
    parsed = parse_bytes(page.encode("latin-1"), SourceType.HTML)
    assert parsed.sections[0].text == "café crème"


# Plain text and decoding


def test_text_bytes_lose_a_bom_and_windows_newlines() -> None:
    parsed = parse_bytes(codecs.BOM_UTF8 + "héllo\r\nworld\r\n".encode(), SourceType.TEXT)
    assert parsed.title is None
    assert [(s.text, s.section_path, s.page_number) for s in parsed.sections] == [
        ("héllo\nworld", (), None)
    ]


def test_utf16_text_with_a_bom_is_decoded() -> None:
    parsed = parse_bytes("naïve text".encode("utf-16"), SourceType.TEXT)
    assert parsed.sections[0].text == "naïve text"


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"text\x00with\x00nuls", "NUL"),
        (b"caf\xe9 is latin-1", "not valid UTF-8"),
    ],
)
def test_binary_or_undecodable_bytes_are_refused(data: bytes, says: str) -> None:
    error = _refused(Unprocessable, parse_bytes, data, SourceType.TEXT)
    assert says in error.detail


def test_html_bytes_with_nuls_are_refused() -> None:
    error = _refused(Unprocessable, parse_bytes, b"<html><p>a\x00b</p></html>", SourceType.HTML)
    assert "NUL" in error.detail


@pytest.mark.parametrize("text", ["a\x00b", "lone \ud800 surrogate"])
def test_text_postgres_cannot_store_is_refused(text: str) -> None:
    _refused(Unprocessable, parse_text, text, SourceType.TEXT)


@pytest.mark.parametrize(
    ("source_type", "content"),
    [
        (SourceType.TEXT, " \n\t \n"),
        (SourceType.MARKDOWN, "# Heading\n\n## Another\n"),
        (SourceType.HTML, "<html><head><title>T</title><script>x()</script></head></html>"),
        (SourceType.HTML, "<body><nav>menu</nav><footer>© me</footer></body>"),
    ],
)
def test_documents_without_text_are_refused(source_type: SourceType, content: str) -> None:
    error = _refused(Unprocessable, parse_text, content, source_type)
    assert error.detail == "the document has no text"
    _refused(Unprocessable, parse_bytes, content.encode(), source_type)


# Sniffing


def _sniff(data: bytes, filename: str | None = None, declared: str | None = None) -> SourceType:
    return sniff_source_type(data, filename=filename, declared=declared)


def test_pdf_is_recognised_by_its_magic_whatever_the_name() -> None:
    assert _sniff(_pdf(["x"]), "notes.txt", "text/plain") is SourceType.PDF


@pytest.mark.parametrize(
    ("data", "filename", "named"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "notes.txt", "PNG image"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "photo.md", "JPEG image"),
        (b"\x1f\x8b\x08\x00\x00\x00", "data.txt.gz", "gzip"),
        (b"\x7fELF\x02\x01\x01", None, "ELF"),
        (b"some\x00binary\x00stuff", "x.txt", "binary data"),
    ],
)
def test_binary_files_are_unsupported(data: bytes, filename: str | None, named: str) -> None:
    with pytest.raises(UnsupportedMediaType, match=named):
        _sniff(data, filename)


def test_text_named_pdf_is_not_parsed_as_pdf() -> None:
    assert _sniff(b"plain words, no magic", "fake.pdf", "application/pdf") is SourceType.TEXT


def test_png_named_pdf_is_unsupported() -> None:
    with pytest.raises(UnsupportedMediaType, match="PNG"):
        _sniff(b"\x89PNG\r\n\x1a\n\x00\x00", "fake.pdf", "application/pdf")


@pytest.mark.parametrize(
    "data",
    [
        b"<!DOCTYPE html><html><body>x</body></html>",
        b"\xef\xbb\xbf  <html lang='en'><p>x</p></html>",
        b"<?xml version='1.0'?>\n<!-- made by hand -->\n<!doctype HTML>\n<html></html>",
        b"<body>\n<p>fragment</p></body>",
    ],
)
def test_html_is_sniffed_without_an_extension(data: bytes) -> None:
    assert _sniff(data) is SourceType.HTML


def test_markdown_mentioning_html_later_stays_markdown() -> None:
    readme = b"# Embed\n\nPaste this:\n\n```html\n<html><body>widget</body></html>\n```\n"
    assert _sniff(readme, "README") is SourceType.MARKDOWN


@pytest.mark.parametrize(
    ("data", "filename", "declared", "expected"),
    [
        (b"no structure at all", "notes.md", None, SourceType.MARKDOWN),
        (b"no structure at all", "NOTES.MARKDOWN", None, SourceType.MARKDOWN),
        (b"no structure at all", None, "text/markdown; charset=utf-8", SourceType.MARKDOWN),
        (b"<p>a fragment</p>", "page.html", None, SourceType.HTML),
        (b"<p>a fragment</p>", None, "text/html; charset=utf-8", SourceType.HTML),
        (b"Title\n=====\n\nbody", None, None, SourceType.MARKDOWN),
        (b"## Usage\n\nbody", "notes.txt", "text/plain", SourceType.MARKDOWN),
        (b"Just a note.\n\nTwo paragraphs.", "notes.txt", "text/plain", SourceType.TEXT),
        (b"#hashtag is not a heading", None, None, SourceType.TEXT),
        (b"", None, None, SourceType.TEXT),
        ("utf-16 words".encode("utf-16"), "a.txt", None, SourceType.TEXT),
    ],
)
def test_text_formats_come_from_content_then_hints(
    data: bytes, filename: str | None, declared: str | None, expected: SourceType
) -> None:
    assert _sniff(data, filename, declared) is expected


# Costs: linear in the size sent, and markup past `inline_bytes` read where it can be stopped


def test_two_megabytes_of_unclosed_brackets_parse_as_markdown_within_a_second() -> None:
    started = time.perf_counter()
    parsed = parse_text("# Brackets\n\n" + "[" * 2_000_000 + "\n\nThe end.", SourceType.MARKDOWN)
    assert time.perf_counter() - started < 2.0  # the inline pass over it took minutes
    assert parsed.title == "Brackets"
    assert _paths(parsed) == [("Brackets",)]


def test_a_heading_keeps_its_markup_out_of_its_path() -> None:
    parsed = parse_text("# **Bold** [link](x) `code`\n\nbody", SourceType.MARKDOWN)
    assert _paths(parsed) == [("Bold link code",)]


def test_a_page_of_a_million_characters_of_paragraphs_parses_within_seconds() -> None:
    started = time.perf_counter()
    parsed = parse_text("<html><body>" + "<p>x" * 250_000, SourceType.HTML)
    assert time.perf_counter() - started < 5.0
    assert len(parsed.sections[0].text.split("\n\n")) == 250_000


@pytest.mark.parametrize(
    ("source_type", "small", "large"),
    [
        (SourceType.HTML, "<p>short</p>", "<p>" + "long " * 1_000 + "</p>"),
        (SourceType.MARKDOWN, "# Short\n\nbody", "# Long\n\n" + "long " * 1_000),
    ],
)
def test_markup_past_inline_bytes_goes_to_the_file_reader(
    source_type: SourceType, small: str, large: str
) -> None:
    read: list[int] = []

    def reader(
        content: str | bytes, source_type: SourceType, limits: ParseLimits
    ) -> ParsedDocument:
        read.append(len(content))
        return read_file(content, source_type, limits)

    parser = Parser(ParseLimits(inline_bytes=1_000), reader)
    for content in (small, large, large.encode()):
        assert parser.parse(content, source_type).sections
    assert read == [len(large), len(large)]
    assert parser.parse("plain " * 1_000, SourceType.TEXT).sections  # text: never
    assert len(read) == 2
