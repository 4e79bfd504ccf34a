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
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
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
    used: list[C]
    dropped: int
    metrics: ContextMetrics


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
) -> ContextResult[C]:
    """Numbered context blocks for `chunks` (best first) within `max_tokens`, with citations."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    generator = CitationGenerator(style)
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
