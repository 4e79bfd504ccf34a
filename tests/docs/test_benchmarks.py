"""docs/BENCHMARKS.md stays a report for users: short, its sections found by the docs that cite
them, its charts present, and no headline ratio against a peer measured in a layout the peer
does not recommend (Chroma with one shared collection and a tenant filter)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REPORT = ROOT / "docs" / "BENCHMARKS.md"
CITING = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MAX_LINES = 600


def headings(text: str) -> list[str]:
    return [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]


def anchor(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def cited_sections(text: str) -> list[str]:
    """Section names quoted right after a mention of BENCHMARKS.md, wrapped lines joined."""
    flat = re.sub(r"\s+", " ", text)
    return re.findall(r'BENCHMARKS\.md(?:\]\([^)]*\))?\)?,? "([^"]+)"', flat)


def sentences(text: str) -> list[str]:
    return re.split(r"(?<=[.;:])\s|\n\n|\n\|", re.sub(r"[ \t]*\n[ \t]*(?=[^|\n])", " ", text))


def test_the_report_fits_in_600_lines() -> None:
    lines = len(REPORT.read_text().splitlines())
    assert lines <= MAX_LINES, f"docs/BENCHMARKS.md has {lines} lines: at most {MAX_LINES}"


def test_every_section_cited_by_another_doc_exists() -> None:
    names = headings(REPORT.read_text())
    missing = [
        f"{doc.name}: {cited!r}"
        for doc in CITING
        if doc != REPORT
        for cited in cited_sections(doc.read_text())
        if not any(name.startswith(cited) for name in names)
    ]
    assert not missing, f"sections cited but not in docs/BENCHMARKS.md: {missing}"


def test_every_anchor_into_the_report_exists() -> None:
    anchors = {anchor(name) for name in headings(REPORT.read_text())}
    broken = [
        f"{doc.name}: #{target}"
        for doc in CITING
        for target in re.findall(r"BENCHMARKS\.md#([\w-]+)", doc.read_text())
        if target not in anchors
    ]
    assert not broken, f"links to missing headings of docs/BENCHMARKS.md: {broken}"


def test_the_summary_names_sections_that_exist() -> None:
    text = REPORT.read_text()
    summary = text.split("## Summary", 1)[1].split("\n## ", 1)[0]
    cited = re.findall(r'"([^"]+)"', summary)
    assert len(cited) >= 8, "the summary names the section of each figure"
    names = headings(text)
    assert [c for c in cited if not any(n.startswith(c) for n in names)] == []


def test_the_charts_exist() -> None:
    charts = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", REPORT.read_text())
    assert charts, "the report shows its charts"
    assert [c for c in charts if not (REPORT.parent / c).is_file()] == []


def test_no_ratio_against_chroma_is_stated() -> None:
    ratio = re.compile(r"\d(?:[.,]\d+)?\s*[\u00d7x](?![\w-])")
    stated = [
        f"{doc.name}: {sentence.strip()[:120]}"
        for doc in (ROOT / "README.md", REPORT)
        for sentence in sentences(doc.read_text())
        if "chroma" in sentence.lower() and ratio.search(sentence)
    ]
    assert not stated, f"a ratio against Chroma (one shared collection) is stated: {stated}"
