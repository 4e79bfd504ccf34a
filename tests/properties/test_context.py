"""Context properties (app/citations/context.py): a chunk's text is cut with an ellipsis within
its limit; a context is the best chunks that fit the token budget, in the documented numbered
blocks, with the citations of exactly those chunks; an answer gets the sources it cites.
"""

from __future__ import annotations

from functools import cache

from hypothesis import given
from hypothesis import strategies as st

from app.citations import (
    ApproxTokenCounter,
    CitationGenerator,
    CitationStyle,
    TokenCounter,
    build_context_with_citations,
    format_chunk_for_context,
    format_llm_response,
    load_token_counter,
)
from tests.citations import Chunk
from tests.properties import examples
from tests.properties.hits import first_seen, ranked_chunks
from tests.properties.texts import odd_text, prose


@examples(150)
@given(odd_text(max_size=40) | prose(max_fragments=40), st.integers(1, 120))
def test_a_chunk_in_a_context_is_its_stripped_text_or_a_prefix_of_it_with_an_ellipsis(
    content: str, max_chars: int
) -> None:
    text, shown = content.strip(), format_chunk_for_context(content, max_chars)

    if len(text) <= max_chars:
        assert shown == text
    else:
        assert len(shown) <= max_chars
        assert shown.endswith("\u2026")
        kept = shown.removesuffix("\u2026")
        assert text.startswith(kept)
        assert kept == kept.rstrip(" \t\r\n,;:")


@cache
def tokenizer_counter() -> TokenCounter:
    return load_token_counter()


# One token per character (counts add up exactly), per four characters, and MiniLM's tokens.
counters = st.one_of(
    st.sampled_from([ApproxTokenCounter(1.0), ApproxTokenCounter()]), st.builds(tokenizer_counter)
)


@examples(120)
@given(
    ranked_chunks(),
    counters,
    st.sampled_from(list(CitationStyle)),
    st.integers(1, 400),
    st.integers(1, 120),
)
def test_a_context_is_the_best_chunks_that_fit_in_documented_blocks(
    chunks: list[Chunk],
    counter: TokenCounter,
    style: CitationStyle,
    max_tokens: int,
    max_chars: int,
) -> None:
    result = build_context_with_citations(
        chunks, counter, style=style, max_tokens=max_tokens, max_chars=max_chars
    )

    eligible = [c for c in first_seen(chunks) if c.content.strip()]
    assert result.used == eligible[: len(result.used)]  # best first, none skipped
    assert result.dropped == len(first_seen(chunks)) - len(result.used)
    assert result.metrics.total_tokens == counter.count(result.context) <= max_tokens
    generator = CitationGenerator(style)
    assert result.citations == generator.generate(result.used)
    numbers = {c.document_id: c.number for c in result.citations}
    blocks = [
        f"[{numbers[c.document_id]}] {format_chunk_for_context(c.content, max_chars)}\n"
        f"Source: {generator.label(c)}"
        for c in result.used
    ]
    assert result.context == "\n\n".join(blocks)
    adds_up = isinstance(counter, ApproxTokenCounter) and counter.chars_per_token == 1.0
    if adds_up and len(result.used) < len(eligible):  # the next block did not fit
        following = eligible[len(result.used)]
        block = (
            f"[{numbers.get(following.document_id, len(numbers) + 1)}] "
            f"{format_chunk_for_context(following.content, max_chars)}\n"
            f"Source: {generator.label(following)}"
        )
        assert len("\n\n".join([*blocks, block])) > max_tokens


# Answers with markers

MARKER_FREE = odd_text(max_size=20).map(lambda text: text.replace("[", "("))


@st.composite
def answers(draw: st.DrawFn) -> tuple[str, set[int]]:
    """An answer whose only markers are the ones drawn: ``[n]`` and ``[n, m]``."""
    parts, marked = [draw(MARKER_FREE)], set()
    for _ in range(draw(st.integers(0, 5))):
        numbers = draw(st.lists(st.integers(0, 9), min_size=1, max_size=3))
        marked.update(numbers)
        separator = draw(st.sampled_from([",", ", ", " , "]))
        parts += [f"[{separator.join(map(str, numbers))}]", draw(MARKER_FREE)]
    return "".join(parts), marked


@examples(150)
@given(answers(), ranked_chunks(), st.booleans())
def test_an_answer_is_followed_by_the_sources_it_cites(
    answer_and_markers: tuple[str, set[int]], chunks: list[Chunk], include_uncited: bool
) -> None:
    answer, marked = answer_and_markers
    citations = CitationGenerator().generate(chunks)

    formatted = format_llm_response(answer, citations, include_uncited=include_uncited)

    numbers = {c.number for c in citations}
    assert formatted.sources == tuple(c for c in citations if c.number in marked)
    assert formatted.uncited == tuple(c for c in citations if c.number not in marked)
    assert formatted.unknown_markers == tuple(sorted(marked - numbers))
    listed = citations if include_uncited else list(formatted.sources)
    sources = "Sources:\n" + "\n".join(c.reference for c in listed) if listed else ""
    assert formatted.text == "\n\n".join(part for part in (answer.strip(), sources) if part)


def test_an_absurdly_long_marker_is_no_marker() -> None:
    """Citation numbers have at most 9 digits: a longer run in brackets is text, not a marker
    (int() refuses more than 4,300 digits, so such a run must never reach it)."""
    formatted = format_llm_response("See [" + "1" * 4301 + "].", [])

    assert formatted.unknown_markers == ()
    assert formatted.text.startswith("See [111")
