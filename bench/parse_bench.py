"""Parsing throughput of the file formats: pages, slides, rows or chapters per second.

    python -m bench.parse_bench [--scale 1.0] [--repeat 5] [--no-sandbox] [--formats pdf,scan]

Makes one file of each format in memory (PDF with fpdf2, one of prose and one of ruled tables
whose pages pdfplumber reads again for their tables; a scanned PDF, pages of the same prose
drawn by Pillow at 300 dpi with no text layer, read by OCR; Word, PowerPoint and Excel with
python-docx, python-pptx and openpyxl; EPUB and ODT as the ZIPs of XML their specifications
describe), then times, best and median of `--repeat` runs:

- `read`: `read_file`, what a sandbox worker runs for an upload (the container's vetting
  included), in this process;
- `vet`: the vetting alone (`zipped.vetted`: sizes, inflation, every XML member streamed
  through the depth-counting parser);
- `chunk`: the service's `Chunker` (MiniLM tokens, 300 per chunk) on the parsed document;
- `sandbox`: `read_file` through `FileSandbox` (a spawned worker process, the file and the
  sections pickled across), the service's path; after one warm-up call that starts the worker;
- for the workbook, openpyxl's own read-only reader walking the same rows (values only, no
  text made, no vetting): what app/ingest/parsing/workbook.py replaced.

Prints a table (units per second of `read`, characters per second, and each stage's median)
and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import statistics
import textwrap
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass

import docx
import openpyxl
import pptx
from fpdf import FPDF
from PIL import Image, ImageDraw, ImageFont

from app.embeddings.local import default_tokenizer_path
from app.ingest.chunking import Chunker, load_tokenizer
from app.ingest.parsing import SourceType
from app.ingest.parsing.files import read_file
from app.ingest.parsing.limits import ParseLimits
from app.ingest.parsing.sandbox import FileSandbox
from app.ingest.parsing.zipped import vetted
from bench.kit.report import print_table, write_json

WORDS = [
    "aardvark",
    "burrow",
    "termite",
    "colony",
    "night",
    "soil",
    "ridge",
    "savanna",
    "ant",
    "nest",
    "claw",
    "snout",
    "tongue",
    "forage",
    "grassland",
    "dusk",
    "mound",
    "digging",
    "insect",
]
# The default limits but a budget that never stops a file: a PDF's table detection stops at
# half of the file's budget (pdftables.py), and here its whole cost is measured.
LIMITS = ParseLimits(seconds=600)


def sentence(n: int, words: int = 14) -> str:
    picked = [WORDS[(n * 7 + i * 3) % len(WORDS)] for i in range(words)]
    return " ".join(picked).capitalize() + f" {n}."


def paragraph(n: int) -> str:
    return " ".join(sentence(n * 5 + i) for i in range(5))


@dataclass(frozen=True, slots=True)
class Sample:
    source_type: SourceType
    unit: str  # what one of `units` is: a page, a slide, a row …
    units: int
    data: bytes
    label: str = ""  # the name in the report, when not the source type's

    @property
    def name(self) -> str:
        return self.label or self.source_type.value


def pdf_sample(scale: float) -> Sample:
    pages = max(1, int(100 * scale))
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    for page in range(pages):
        pdf.add_page()
        pdf.multi_cell(0, 6, "\n\n".join(paragraph(page * 3 + i) for i in range(3)))
    return Sample(SourceType.PDF, "page", pages, bytes(pdf.output()))


def scan_sample(scale: float) -> Sample:
    """A4 pages at 300 dpi of three paragraphs each in 11-point letters (46 pixels), as a
    scanner makes them: images only, so every page is read by OCR."""
    pages = max(1, int(10 * scale))
    font = ImageFont.load_default(size=46)
    images = []
    for page in range(pages):
        image = Image.new("L", (2480, 3508), 255)
        draw = ImageDraw.Draw(image)
        lines = [
            line for i in range(3) for line in [*textwrap.wrap(paragraph(page * 3 + i), 80), ""]
        ]
        for row, line in enumerate(lines):
            draw.text((200, 200 + row * 70), line, fill=0, font=font)
        images.append(image)
    out = io.BytesIO()
    images[0].save(out, "PDF", resolution=300, save_all=True, append_images=images[1:])
    return Sample(SourceType.PDF, "page", pages, out.getvalue(), label="scan")


def pdf_tables_sample(scale: float) -> Sample:
    """Pages of a ruled table of six columns (fpdf2 repeats the header row on each page)."""
    rows = max(1, int(100 * scale)) * 40  # ~40 rows a page
    pdf = FPDF()
    pdf.set_font("Helvetica", size=9)
    pdf.add_page()
    with pdf.table() as table:
        table.row([f"col {column}" for column in range(6)])
        for row in range(rows):
            table.row([f"{WORDS[(row + column) % len(WORDS)]} {row}" for column in range(6)])
    return Sample(SourceType.PDF, "page", pdf.pages_count, bytes(pdf.output()), "pdf-tables")


def docx_sample(scale: float) -> Sample:
    sections = max(1, int(100 * scale))
    word = docx.Document()
    for n in range(sections):
        word.add_heading(f"Section {n}", level=1 + n % 3)
        for i in range(4):
            word.add_paragraph(paragraph(n * 4 + i))
        if n % 10 == 0:
            table = word.add_table(rows=10, cols=3)
            for row in table.rows:
                for cell in row.cells:
                    cell.text = sentence(n, words=3)
    out = io.BytesIO()
    word.save(out)
    return Sample(SourceType.DOCX, "paragraph", sections * 5, out.getvalue())


def pptx_sample(scale: float) -> Sample:
    slides = max(1, int(200 * scale))
    deck = pptx.Presentation()
    for n in range(slides):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        if slide.shapes.title is not None:
            slide.shapes.title.text = f"Slide {n}: {sentence(n, words=4)}"
        slide.placeholders[1].text = "\n".join(sentence(n * 5 + i, words=10) for i in range(5))
        if (notes := slide.notes_slide.notes_text_frame) is not None:
            notes.text = paragraph(n)
    out = io.BytesIO()
    deck.save(out)
    return Sample(SourceType.PPTX, "slide", slides, out.getvalue())


def xlsx_sample(scale: float) -> Sample:
    rows = max(1, int(50_000 * scale))
    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("Observations")
    sheet.append(["Site", "Count", "Weight", "Seen", "Observer", "Notes"])
    start = dt.date(2024, 1, 1)
    for n in range(rows):
        day = start + dt.timedelta(days=n % 365)
        sheet.append([f"site {n % 97}", n, n * 0.25, day, WORDS[n % len(WORDS)], sentence(n, 6)])
    out = io.BytesIO()
    book.save(out)
    return Sample(SourceType.XLSX, "row", rows + 1, out.getvalue())


def _zip(members: list[tuple[str, bytes]]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for index, (name, data) in enumerate(members):
            archive.writestr(name, data, zipfile.ZIP_STORED if index == 0 else None)
    return out.getvalue()


def epub_sample(scale: float) -> Sample:
    chapters = max(1, int(50 * scale))
    items = "".join(
        f'<item id="c{n}" href="c{n}.xhtml" media-type="application/xhtml+xml"/>'
        for n in range(chapters)
    )
    spine = "".join(f'<itemref idref="c{n}"/>' for n in range(chapters))
    opf = (
        '<package xmlns="http://www.idpf.org/2007/opf" version="3.0"><metadata '
        'xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Bench</dc:title></metadata>'
        f"<manifest>{items}</manifest><spine>{spine}</spine></package>"
    )
    container = (
        '<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
        '<rootfile full-path="content.opf"/></rootfiles></container>'
    )
    members = [
        ("mimetype", b"application/epub+zip"),
        ("META-INF/container.xml", container.encode()),
        ("content.opf", opf.encode()),
    ]
    for n in range(chapters):
        body = f"<h1>Chapter {n}</h1>" + "".join(
            f"<h2>Part {i}</h2><p>{paragraph(n * 20 + i)}</p>" for i in range(20)
        )
        page = f'<html xmlns="http://www.w3.org/1999/xhtml"><body>{body}</body></html>'
        members.append((f"c{n}.xhtml", page.encode()))
    return Sample(SourceType.EPUB, "chapter", chapters, _zip(members))


def odt_sample(scale: float) -> Sample:
    sections = max(1, int(100 * scale))
    text = "".join(
        f'<text:h text:outline-level="{1 + n % 3}">Section {n}</text:h>'
        + "".join(f"<text:p>{paragraph(n * 4 + i)}</text:p>" for i in range(4))
        for n in range(sections)
    )
    content = (
        '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0"'
        ' xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body>'
        f"<office:text>{text}</office:text></office:body></office:document-content>"
    )
    members = [
        ("mimetype", b"application/vnd.oasis.opendocument.text"),
        ("content.xml", content.encode()),
    ]
    return Sample(SourceType.ODT, "paragraph", sections * 5, _zip(members))


SAMPLES: list[Callable[[float], Sample]] = [
    pdf_sample,
    scan_sample,
    pdf_tables_sample,
    docx_sample,
    pptx_sample,
    xlsx_sample,
    epub_sample,
    odt_sample,
]


def timed(call: Callable[[], object], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return times


def openpyxl_rows(data: bytes) -> int:
    book = openpyxl.load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    count = 0
    for sheet in book.worksheets:
        sheet.reset_dimensions()
        count += sum(1 for _ in sheet.values)
    book.close()
    return count


def measure(sample: Sample, chunker: Chunker, sandbox: FileSandbox | None, repeat: int) -> dict:
    parsed = read_file(sample.data, sample.source_type, LIMITS)
    chars = sum(len(section.text) for section in parsed.sections)
    read = timed(lambda: read_file(sample.data, sample.source_type, LIMITS), repeat)
    result = {
        "format": sample.name,
        "bytes": len(sample.data),
        "unit": sample.unit,
        "units": sample.units,
        "chars": chars,
        "chunks": len(chunker.split(parsed)),
        "read_s": read,
        "chunk_s": timed(lambda: chunker.split(parsed), repeat),
    }
    if sample.source_type is not SourceType.PDF:
        result["vet_s"] = timed(lambda: vetted(sample.data, LIMITS).close(), repeat)
    if sample.name == "scan":  # the share of the prose's words OCR read back
        read_words = {
            word.strip(".").lower() for word in " ".join(s.text for s in parsed.sections).split()
        }
        result["word_recall"] = sum(w in read_words for w in WORDS) / len(WORDS)
    if sample.source_type is SourceType.XLSX:
        result["openpyxl_s"] = timed(lambda: openpyxl_rows(sample.data), repeat)
    if sandbox is not None:
        sandbox(sample.data, sample.source_type, LIMITS)  # the worker imports its readers
        result["sandbox_s"] = timed(
            lambda: sandbox(sample.data, sample.source_type, LIMITS), repeat
        )
    return result


def report(results: list[dict]) -> None:
    def median_ms(values: list[float] | None) -> str:
        return f"{statistics.median(values) * 1000:,.0f}" if values else "-"

    rows = []
    for r in results:
        best = min(r["read_s"])
        rows.append(
            [
                r["format"],
                f"{r['bytes'] / 1024:,.0f}",
                f"{r['units']:,} {r['unit']}s",
                f"{r['units'] / best:,.{2 if r['units'] / best < 10 else 0}f} {r['unit']}s/s",
                f"{r['chars'] / best / 1e6:.2f}",
                median_ms(r["read_s"]),
                median_ms(r.get("vet_s")),
                median_ms(r.get("sandbox_s")),
                f"{r['chunks']:,}",
                median_ms(r["chunk_s"]),
            ]
        )
    header = [
        *("format", "KB", "size", "read (best)", "M chars/s", "read ms", "vet ms"),
        *("sandbox ms", "chunks", "chunk ms"),
    ]
    print_table("parsing throughput (bench/parse_bench.py)", header, rows)
    for r in results:
        if "word_recall" in r:
            print(f"scan: OCR read back {r['word_recall']:.0%} of the prose's words")  # noqa: T201
        if "openpyxl_s" in r:
            best = min(r["openpyxl_s"])
            print(  # noqa: T201
                f"openpyxl read-only on the same workbook: {r['units'] / best:,.0f} rows/s "
                f"(median {statistics.median(r['openpyxl_s']) * 1000:,.0f} ms, values only)"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="size of each file (1.0)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-sandbox", action="store_true", help="skip the worker process")
    parser.add_argument(
        "--formats", "--only", default="", help="only these rows (pdf,pdf-tables,scan,docx …)"
    )
    args = parser.parse_args()
    wanted = {name.strip() for name in args.formats.split(",") if name.strip()}
    chunker = Chunker(load_tokenizer(default_tokenizer_path()), chunk_tokens=300, overlap_tokens=50)
    sandbox = None if args.no_sandbox else FileSandbox(1)
    try:
        samples = [make(args.scale) for make in SAMPLES]
        results = [
            measure(sample, chunker, sandbox, args.repeat)
            for sample in samples
            if not wanted or sample.name in wanted
        ]
    finally:
        if sandbox is not None:
            sandbox.close()
    report(results)
    path = write_json("parse_bench", {"args": vars(args), "results": results})
    print(f"JSON: {path}")  # noqa: T201


if __name__ == "__main__":
    main()
