"""The context block of an LLM prompt, with its citations, within a token budget.

A context is numbered blocks separated by a blank line; the number is the cited document's
(two chunks of one document share it), the "Source:" line is the chunk's own source:

    [1] Vectors are stored in PostgreSQL with pgvector…
    Source: **Operations Guide** (PDF, Page 3) _Storage → Vectors_

    [2] Each tenant sees only its own rows.
    Source: **Security Notes** [Source](https://example.com/security)

Budget rules: chunks are taken best first while the whole context stays within `max_tokens`
(as counted by the given `TokenCounter`, separators included); the first chunk that does not
fit ends the context, so a lower-ranked chunk never takes the place of a higher-ranked one, and
a block, "Source:" line included, is either whole or absent. A chunk seen twice (same chunk id)
is used once; a chunk with blank content is skipped. Citations cover only the chunks used.

Neighbours (the chunks around the hits in their documents, `neighbours`) widen a context:
once the hits are placed, the neighbours are added nearest first (distance 1 around every hit
in rank order, then 2, ...), each only when it still fits and the chunk between it and its hit
is in; a hit is never left out for a neighbour. Consecutive chunks of a document, hits and
neighbours, make one block in document order (the overlap the chunker repeats between them
shown once), blocks ordered by their best hit, and its "Source:" line covers the block's pages.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar
from uuid import UUID

from app.citations.generator import CitableChunk, Citation, CitationGenerator, CitationStyle
from app.citations.metrics import ContextMetrics, context_metrics
from app.citations.tokens import TokenCounter
from app.inputs.vocabulary import DEFAULT_MAX_CHARS as DEFAULT_MAX_CHARS
from app.inputs.vocabulary import DEFAULT_MAX_TOKENS as DEFAULT_MAX_TOKENS

BLOCK_SEPARATOR = "\n\n"
ELLIPSIS = "\u2026"
# A word boundary further back than this share of the limit is not worth the lost text.
_MIN_KEPT_SHARE = 0.5
_TRAILING_PUNCTUATION = " \t\r\n,;:"
# Citation numbers of up to 9 digits: a longer run is no citation (and int() refuses runs
# past 4,300 digits).
_MARKER = re.compile(r"\[(\d{1,9}(?:\s*,\s*\d{1,9})*)\]")

C = TypeVar("C", bound=CitableChunk)


@dataclass(frozen=True, slots=True)
class ContextResult(Generic[C]):
    context: str
    citations: list[Citation]
    used: list[C]  # the hits placed, best first
    dropped: int
    metrics: ContextMetrics
    neighbours: list[C] = field(default_factory=list)  # the neighbours placed beside them


@dataclass(frozen=True, slots=True)
class FormattedAnswer:
    """An LLM answer followed by the sources its ``[n]`` markers cite."""

    text: str
    answer: str
    sources: tuple[Citation, ...]
    uncited: tuple[Citation, ...]
    unknown_markers: tuple[int, ...]


def format_chunk_for_context(content: str, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """`content` stripped, and cut to at most `max_chars` characters, ellipsis included.

    The cut falls on the last whitespace before the limit (dropping a trailing ``,;:``), unless
    that would lose more than half of the limit (one very long word, a URL): then it falls at
    the limit itself.
    """
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    text = content.strip()
    if len(text) <= max_chars:
        return text
    head = text[: max_chars - 1]
    if not text[max_chars - 1].isspace():
        boundary = max((head.rfind(space) for space in (" ", "\n", "\t")), default=-1)
        if boundary >= max_chars * _MIN_KEPT_SHARE:
            head = head[:boundary]
    return head.rstrip(_TRAILING_PUNCTUATION) + ELLIPSIS


def format_block(number: int, content: str, source: str) -> str:
    return f"[{number}] {content}\nSource: {source}"


def build_context_with_citations(
    chunks: Sequence[C],
    counter: TokenCounter,
    *,
    style: CitationStyle = CitationStyle.NUMBERED,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    max_chars: int = DEFAULT_MAX_CHARS,
    neighbours: Sequence[C] = (),
) -> ContextResult[C]:
    """Numbered context blocks for `chunks` (best first) within `max_tokens`, with citations;
    widened by `neighbours` (chunks of the same documents) when there are any."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    generator = CitationGenerator(style)
    if neighbours:
        return _widened(chunks, neighbours, counter, generator, max_tokens, max_chars)
    blocks, used = _fill_budget(chunks, counter, generator, max_tokens=max_tokens, chars=max_chars)
    context = BLOCK_SEPARATOR.join(blocks)
    total_tokens = counter.count(context)
    while total_tokens > max_tokens:  # only for a counter whose counts do not add up
        blocks.pop()
        used.pop()
        context = BLOCK_SEPARATOR.join(blocks)
        total_tokens = counter.count(context)
    distinct = len({chunk.chunk_id for chunk in chunks})
    return ContextResult(
        context=context,
        citations=generator.generate(used),
        used=used,
        dropped=distinct - len(used),
        metrics=context_metrics(used, context, total_tokens=total_tokens),
    )


def _fill_budget(
    chunks: Sequence[C],
    counter: TokenCounter,
    generator: CitationGenerator,
    *,
    max_tokens: int,
    chars: int,
) -> tuple[list[str], list[C]]:
    """The blocks of the best chunks whose token counts add up to at most `max_tokens`."""
    separator_tokens = counter.count(BLOCK_SEPARATOR)
    numbers: dict[UUID, int] = {}
    seen: set[UUID] = set()
    blocks: list[str] = []
    used: list[C] = []
    total = 0
    for chunk in chunks:
        if chunk.chunk_id in seen:
            continue
        content = format_chunk_for_context(chunk.content, chars)
        if not content:
            continue
        number = numbers.get(chunk.document_id, len(numbers) + 1)
        block = format_block(number, content, generator.label(chunk))
        total += counter.count(block) + (separator_tokens if blocks else 0)
        if total > max_tokens:
            break
        numbers[chunk.document_id] = number
        seen.add(chunk.chunk_id)
        blocks.append(block)
        used.append(chunk)
    return blocks, used


class _Runs(Generic[C]):
    """Hits and the neighbours placed beside them, as the blocks of a context."""

    def __init__(self, counter: TokenCounter, generator: CitationGenerator, chars: int) -> None:
        self.counter, self.generator, self.chars = counter, generator, chars
        self.separator = counter.count(BLOCK_SEPARATOR)
        self.hits: list[C] = []
        self.extra: dict[tuple[UUID, int], C] = {}
        self._counts: dict[str, int] = {}

    def blocks(self) -> list[str]:
        rank = {(c.document_id, c.chunk_index): n for n, c in enumerate(self.hits)}
        by_document: dict[UUID, dict[int, C]] = {}
        for chunk in [*self.hits, *self.extra.values()]:
            by_document.setdefault(chunk.document_id, {})[chunk.chunk_index] = chunk
        runs: list[tuple[int, list[C]]] = []
        for document_id, chunks in by_document.items():
            run: list[C] = []
            for index in sorted(chunks):
                if run and index != run[-1].chunk_index + 1:
                    runs.append((_best(run, rank, document_id), run))
                    run = []
                run.append(chunks[index])
            runs.append((_best(run, rank, document_id), run))
        runs.sort(key=lambda item: item[0])
        numbers: dict[UUID, int] = {}
        out = []
        for _, run in runs:
            number = numbers.setdefault(run[0].document_id, len(numbers) + 1)
            text = _joined([format_chunk_for_context(c.content, self.chars) for c in run])
            out.append(format_block(number, text, self.generator.run_label(run)))
        return out

    def tokens(self) -> int:
        blocks = self.blocks()
        for block in blocks:
            if block not in self._counts:
                self._counts[block] = self.counter.count(block)
        return sum(self._counts[b] for b in blocks) + self.separator * max(len(blocks) - 1, 0)


def _best(run: Sequence[C], rank: dict[tuple[UUID, int], int], document_id: UUID) -> int:
    return min(rank.get((document_id, c.chunk_index), len(rank)) for c in run)


def _joined(parts: Sequence[str]) -> str:
    """Consecutive chunks' texts as one: the overlap the chunker repeats at the start of the
    next one (the end of this one, 20 characters or more) is shown once."""
    text = parts[0]
    for part in parts[1:]:
        text = _overlapped(text, part)
    return text


def _overlapped(head: str, tail: str, least: int = 20) -> str:
    probe = tail[:least]
    if len(probe) == least:
        start = max(0, len(head) - len(tail))
        while (found := head.find(probe, start)) != -1:
            if tail.startswith(head[found:]):
                return head + tail[len(head) - found :]
            start = found + 1
    return f"{head}\n{tail}"


def _widened(
    chunks: Sequence[C],
    neighbours: Sequence[C],
    counter: TokenCounter,
    generator: CitationGenerator,
    max_tokens: int,
    chars: int,
) -> ContextResult[C]:
    runs: _Runs[C] = _Runs(counter, generator, chars)
    seen: set[UUID] = set()
    for chunk in chunks:  # the hits first, best first, as without neighbours
        if chunk.chunk_id in seen or not format_chunk_for_context(chunk.content, chars):
            continue
        runs.hits.append(chunk)
        if runs.tokens() > max_tokens:
            runs.hits.pop()
            break
        seen.add(chunk.chunk_id)
    placed = {(c.document_id, c.chunk_index) for c in runs.hits}
    pool = {(c.document_id, c.chunk_index): c for c in neighbours}
    reach = max((abs(k[1] - h.chunk_index) for h in runs.hits for k in pool
                 if k[0] == h.document_id), default=0)  # fmt: skip
    for distance in range(1, reach + 1):
        for hit in list(runs.hits):
            for step in (-1, 1):
                key = (hit.document_id, hit.chunk_index + step * distance)
                inner = (hit.document_id, hit.chunk_index + step * (distance - 1))
                if key not in pool or key in placed or key in runs.extra:
                    continue
                if inner not in placed and inner not in runs.extra:
                    continue  # never a neighbour cut off from its hit
                candidate = pool[key]
                if not format_chunk_for_context(candidate.content, chars):
                    continue
                runs.extra[key] = candidate
                if runs.tokens() > max_tokens:
                    del runs.extra[key]
    blocks = runs.blocks()
    context = BLOCK_SEPARATOR.join(blocks)
    total_tokens = counter.count(context)
    while total_tokens > max_tokens and (runs.extra or runs.hits):  # counts that do not add up
        if runs.extra:
            runs.extra.popitem()
        else:
            runs.hits.pop()
        context = BLOCK_SEPARATOR.join(runs.blocks())
        total_tokens = counter.count(context)
    used, extra = list(runs.hits), list(runs.extra.values())
    distinct = len({chunk.chunk_id for chunk in chunks})
    return ContextResult(
        context=context,
        citations=generator.generate([*used, *extra]),
        used=used,
        dropped=distinct - len(used),
        metrics=context_metrics(used, context, total_tokens=total_tokens),
        neighbours=extra,
    )


def format_llm_response(
    answer: str, citations: Sequence[Citation], *, include_uncited: bool = False
) -> FormattedAnswer:
    """`answer` followed by a "Sources:" list of the citations its markers point to.

    Markers are ``[n]`` or ``[n, m]``; those that match no citation number are reported in
    `unknown_markers` (sorted, once each) and left in the text as they are. With
    `include_uncited`, the list also holds the citations the answer does not mention.
    """
    by_number = {citation.number: citation for citation in citations}
    marked = {
        int(number) for match in _MARKER.finditer(answer) for number in match.group(1).split(",")
    }
    sources = tuple(by_number[n] for n in sorted(marked & by_number.keys()))
    uncited = tuple(c for n, c in sorted(by_number.items()) if n not in marked)
    listed = sorted(sources + uncited, key=lambda c: c.number) if include_uncited else sources
    body = answer.strip()
    if listed:
        lines = "\n".join(citation.reference for citation in listed)
        body = BLOCK_SEPARATOR.join(part for part in (body, f"Sources:\n{lines}") if part)
    return FormattedAnswer(
        text=body,
        answer=answer,
        sources=sources,
        uncited=uncited,
        unknown_markers=tuple(sorted(marked - by_number.keys())),
    )
