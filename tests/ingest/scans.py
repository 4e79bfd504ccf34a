"""Scanned PDFs built in the test: text drawn into an image with Pillow at a known size, the
image saved as a PDF page with no text layer, alone or beside pages that have one."""

from __future__ import annotations

import io
import random

from PIL import Image, ImageDraw, ImageFont
from pypdf import PdfReader, PdfWriter

DPI = 150  # the scan's resolution: a line of 32-pixel letters is 15 points high on the page
WIDTH = 1240  # pixels: a page 8.3 inches wide


def scan(lines: list[str], *, size: int = 32) -> Image.Image:
    """A white page of black lines of text, `size` pixels high, as a scanner would see it."""
    image = Image.new("L", (WIDTH, 120 + len(lines) * size * 2), 255)
    font = ImageFont.load_default(size=size)
    draw = ImageDraw.Draw(image)
    for row, line in enumerate(lines):
        draw.text((80, 60 + row * size * 2), line, fill=0, font=font)
    return image


def noise(width: int = 600, height: int = 600) -> Image.Image:
    """Grey speckle: what a scanner gives for a photo of nothing."""
    return Image.effect_noise((width, height), 96).convert("L")


def scribbles(seed: int = 1) -> Image.Image:
    """Rows of pen strokes the size of letters: Tesseract reads them as words (garbage, such as
    "ETM hve Asxge FONSI"), with a mean confidence near 25."""
    strokes = random.Random(seed)
    image = Image.new("L", (WIDTH, 600), 255)
    draw = ImageDraw.Draw(image)
    for row in range(8):
        x, y = 60, 40 + row * 70
        while x < WIDTH - 90:
            points = [(x + strokes.randint(0, 20), y + strokes.randint(0, 30)) for _ in range(4)]
            draw.line(points, fill=0, width=3)
            x += strokes.randint(15, 40)
    return image


def scanned_pdf(*pages: Image.Image, dpi: float = DPI) -> bytes:
    """A PDF of the images, one a page, with no text layer, `dpi` pixels to the inch."""
    out = io.BytesIO()
    first, *rest = pages
    first.save(out, "PDF", resolution=dpi, save_all=True, append_images=rest)
    return out.getvalue()


def merged_pdf(*documents: bytes) -> bytes:
    """The pages of the documents in order, as one PDF."""
    writer = PdfWriter()
    for data in documents:
        writer.append(PdfReader(io.BytesIO(data)))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()
