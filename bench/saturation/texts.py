"""Query texts for the load: tens of thousands of distinct texts, so that a run of "new texts"
never asks the service the same thing twice. The synthetic workload's: NFCorpus and MEDLINE
queries first, then document titles, then runs of 12 words from the abstracts. The abstracts
workload's, as long as a chat backend's questions: MEDLINE's queries (12-25 words), then runs of
20 words."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from bench.kit.paths import DATA

SOURCES = ("nfcorpus", "medline")
WINDOW = 12  # words of an abstract per text
LONG_WINDOW = 20  # the abstracts workload's


def _records(path: Path) -> Iterator[dict[str, str]]:
    with path.open() as lines:
        for line in lines:
            yield json.loads(line)


def _windows(data: Path, window: int) -> Iterator[str]:
    for source in SOURCES:
        for record in _records(data / source / "corpus.jsonl"):
            words = record["text"].split()
            for start in range(0, len(words) - window + 1, window):
                yield " ".join(words[start : start + window])


def _candidates(data: Path) -> Iterator[str]:
    for source in SOURCES:
        for record in _records(data / source / "queries.jsonl"):
            yield record["text"]
    for source in SOURCES:
        for record in _records(data / source / "corpus.jsonl"):
            if record.get("title"):
                yield record["title"]
    yield from _windows(data, WINDOW)


def _long_candidates(data: Path) -> Iterator[str]:
    for record in _records(data / "medline" / "queries.jsonl"):
        yield record["text"]
    yield from _windows(data, LONG_WINDOW)


def distinct_texts(data: Path = DATA, *, long: bool = False) -> list[str]:
    """Every usable text once, in the order above (`long`: the abstracts workload's)."""
    seen: dict[str, None] = {}
    for text in (_long_candidates if long else _candidates)(data):
        cleaned = " ".join(text.split())
        if 4 <= len(cleaned.split()) <= 30:
            seen.setdefault(cleaned, None)
    return list(seen)


class TextSupply:
    """Hands out distinct texts, never the same one twice; `take` raises when they run out."""

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.used = 0

    def take(self, count: int) -> list[str]:
        if self.used + count > len(self.texts):
            raise RuntimeError(
                f"only {len(self.texts) - self.used} new texts left, {count} asked: "
                "shorten --seconds or use fewer cells"
            )
        taken = self.texts[self.used : self.used + count]
        self.used += count
        return taken
