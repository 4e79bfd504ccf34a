"""Context assembly: truncation, the token budget, numbering, LLM answers, token counters."""

from __future__ import annotations

import random

import pytest
from tokenizers import Tokenizer

from app.citations import (
    ApproxTokenCounter,
    CitationGenerator,
    CitationStyle,
    TokenizerCounter,
    build_context_with_citations,
    format_chunk_for_context,
    format_llm_response,
    load_token_counter,
)
from app.embeddings.local import default_tokenizer_path
from tests.citations import Chunk, doc_id, make_chunk

WORDS = [
    *("retrieval", "tenant", "vector", "índice", "résumé", "naïve", "東京"),
    *("chunk,", "citation.", "(PostgreSQL)", "--", "ok"),
]


@pytest.fixture(scope="module")
def counter() -> TokenizerCounter:
    return load_token_counter()


@pytest.fixture(scope="module")
def exact() -> TokenizerCounter:
    """The same tokenizer without the word cache: one encode per text."""
    return load_token_counter(word_cache_size=0)


def prose(seed: int, words: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(words))


def ranked_chunks(count: int, *, words: int = 80) -> list[Chunk]:
    """`count` chunks from count // 2 documents, each document's two chunks apart."""
    return [
        make_chunk(
            n,
            n % max(count // 2, 1),
            f"Doc {n % max(count // 2, 1)}",
            content=prose(n, words),
            similarity=1.0 - n / 100,
            source_type="pdf",
            page=n + 1,
        )
        for n in range(count)
    ]


# format_chunk_for_context


def test_short_content_is_only_stripped() -> None:
    assert format_chunk_for_context("  Short text.\n") == "Short text."


def test_long_content_is_cut_on_a_word_boundary_with_an_ellipsis() -> None:
    assert format_chunk_for_context("alpha beta gamma delta", 13) == "alpha beta…"
    assert format_chunk_for_context("alpha beta, gamma delta", 13) == "alpha beta…"


def test_cut_falling_just_before_a_space_keeps_the_whole_word() -> None:
    assert format_chunk_for_context("alpha beta gamma", 11) == "alpha beta…"


def test_one_long_word_is_cut_at_the_limit() -> None:
    assert format_chunk_for_context("see https://example.com/a/very/long/path", 20) == (
        "see https://example…"
    )


def test_default_limit_is_500_characters_ellipsis_included() -> None:
    text = format_chunk_for_context("word " * 300)

    assert len(text) <= 500
    assert text.endswith("word…")


def test_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        format_chunk_for_context("text", 0)


# build_context_with_citations


def test_context_has_exact_numbered_blocks_and_citations_of_used_documents() -> None:
    chunks = [
        make_chunk(
            1, 1, "Ops Guide", content="Vectors live in pgvector.", source_type="pdf", page=3
        ),
        make_chunk(2, 2, "Security", content="Tenants are isolated.", source_url="https://x.org/s"),
        make_chunk(3, 1, "Ops Guide", content="Backups run nightly.", source_type="pdf", page=7),
    ]

    result = build_context_with_citations(chunks, ApproxTokenCounter())

    assert result.context == (
        "[1] Vectors live in pgvector.\n"
        "Source: **Ops Guide** (PDF, Page 3)\n\n"
        "[2] Tenants are isolated.\n"
        "Source: **Security** [Source](https://x.org/s)\n\n"
        "[1] Backups run nightly.\n"
        "Source: **Ops Guide** (PDF, Page 7)"
    )
    assert [c.text for c in result.citations] == [
        "[1] **Ops Guide** (PDF, Pages 3, 7)",
        "[2] **Security** [Source](https://x.org/s)",
    ]
    assert (result.used, result.dropped) == (chunks, 0)


@pytest.mark.parametrize(
    ("style", "source"),
    [(CitationStyle.INLINE, "Source: Doc: Page 2"), (CitationStyle.COMPACT, "Source: [Doc, p.2]")],
)
def test_source_line_follows_the_style(style: CitationStyle, source: str) -> None:
    chunk = make_chunk(1, 1, "Doc", content="Text.", page=2)

    result = build_context_with_citations([chunk], ApproxTokenCounter(), style=style)

    assert result.context == f"[1] Text.\n{source}"


@pytest.mark.parametrize("max_tokens", [1, 40, 150, 333, 1000, 2000])
def test_budget_is_respected_with_the_real_tokenizer(
    counter: TokenizerCounter, exact: TokenizerCounter, max_tokens: int
) -> None:
    chunks = ranked_chunks(20)

    result = build_context_with_citations(chunks, counter, max_tokens=max_tokens)

    assert exact.count(result.context) == result.metrics.total_tokens <= max_tokens
    assert result.used == chunks[: len(result.used)]
    assert result.dropped == len(chunks) - len(result.used)


def test_lowest_ranked_chunks_are_dropped_first_and_blocks_stay_whole(
    counter: TokenizerCounter,
) -> None:
    chunks = ranked_chunks(20)
    full = build_context_with_citations(chunks, counter, max_tokens=100_000)
    budget = full.metrics.total_tokens // 2

    result = build_context_with_citations(chunks, counter, max_tokens=budget)

    assert 0 < len(result.used) < len(chunks)
    assert full.context.startswith(result.context + "\n\n")
    assert result.context.endswith(CitationGenerator().label(result.used[-1]))


def test_citations_number_only_documents_in_the_context() -> None:
    chunks = [
        make_chunk(1, 1, "First", content="a " * 10),
        make_chunk(2, 2, "Second", content="b " * 500),
        make_chunk(3, 3, "Third", content="c"),
    ]

    result = build_context_with_citations(chunks, ApproxTokenCounter(), max_tokens=30)

    assert [c.title for c in result.citations] == ["First"]
    assert (len(result.used), result.dropped) == (1, 2)


def test_first_chunk_over_budget_gives_an_empty_context() -> None:
    result = build_context_with_citations([make_chunk(1, 1)], ApproxTokenCounter(), max_tokens=2)

    assert (result.context, result.citations, result.used, result.dropped) == ("", [], [], 1)
    assert result.metrics.quality_score == 0.0


def test_content_is_truncated_to_max_chars() -> None:
    chunk = make_chunk(1, 1, "Doc", content="word " * 200)

    result = build_context_with_citations([chunk], ApproxTokenCounter(), max_chars=20)

    assert result.context == "[1] word word word word…\nSource: **Doc** (Text)"


def test_repeated_and_blank_chunks_are_left_out() -> None:
    first = make_chunk(1, 1, "Doc", content="Kept.")
    blank = make_chunk(2, 2, "Blank", content="  \n")

    result = build_context_with_citations([first, first, blank], ApproxTokenCounter())

    assert result.context == "[1] Kept.\nSource: **Doc** (Text)"
    assert (result.used, result.dropped) == ([first], 1)


class JoinPenaltyCounter:
    """A counter whose whole is more than the sum of its parts (like some BPE merges)."""

    def count(self, text: str) -> int:
        return len(text.split()) * (1 + text.count("\n\n"))


def test_budget_holds_for_a_counter_that_does_not_add_up() -> None:
    chunks = [make_chunk(n, n, content="one two three") for n in range(5)]

    result = build_context_with_citations(chunks, JoinPenaltyCounter(), max_tokens=40)

    assert JoinPenaltyCounter().count(result.context) <= 40
    assert len(result.used) == 2


def test_output_is_deterministic(counter: TokenizerCounter) -> None:
    chunks = ranked_chunks(20)

    runs = [build_context_with_citations(chunks, counter, max_tokens=900) for _ in range(3)]

    assert runs[0] == runs[1] == runs[2]


def test_budget_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        build_context_with_citations([], ApproxTokenCounter(), max_tokens=0)


# format_llm_response


def citations_for_answer() -> list[Chunk]:
    return [
        make_chunk(1, 1, "Ops Guide", source_type="pdf", page=3),
        make_chunk(2, 2, "Security"),
        make_chunk(3, 3, "FAQ", source_type="markdown"),
    ]


def test_answer_gets_its_cited_sources_and_unknown_markers_are_reported() -> None:
    citations = CitationGenerator().generate(citations_for_answer())
    answer = "Vectors use pgvector [1]. Isolation is by RLS [1, 4]. See [Source](x) and [7].\n"

    formatted = format_llm_response(answer, citations)

    assert formatted.text == (
        "Vectors use pgvector [1]. Isolation is by RLS [1, 4]. See [Source](x) and [7].\n\n"
        "Sources:\n"
        "[1] **Ops Guide** (PDF, Page 3)"
    )
    assert formatted.unknown_markers == (4, 7)
    assert [c.number for c in formatted.sources] == [1]
    assert [c.number for c in formatted.uncited] == [2, 3]


def test_uncited_sources_can_be_listed_too() -> None:
    citations = CitationGenerator(CitationStyle.COMPACT).generate(citations_for_answer())

    formatted = format_llm_response("As [3][2] say.", citations, include_uncited=True)

    assert (
        formatted.text
        == "As [3][2] say.\n\nSources:\n[1] [Ops Guide, p.3]\n[2] [Security]\n[3] [FAQ]"
    )
    assert formatted.unknown_markers == ()


def test_answer_without_markers_is_returned_as_is() -> None:
    citations = CitationGenerator().generate(citations_for_answer())

    formatted = format_llm_response("I do not know.", citations)

    assert (formatted.text, formatted.sources, formatted.unknown_markers) == (
        "I do not know.",
        (),
        (),
    )


def test_markers_with_no_citations_at_all_are_all_unknown() -> None:
    formatted = format_llm_response("Claim [1], [2,3].", [])

    assert formatted.unknown_markers == (1, 2, 3)
    assert formatted.text == "Claim [1], [2,3]."


def test_answer_cites_context_citations_by_number(counter: TokenizerCounter) -> None:
    result = build_context_with_citations(ranked_chunks(6), counter)

    formatted = format_llm_response("From [2].", result.citations)

    assert formatted.sources == (result.citations[1],)
    assert formatted.sources[0].document_id == doc_id(1)


# token counters


def test_tokenizer_counter_counts_without_special_tokens_or_truncation(
    counter: TokenizerCounter,
) -> None:
    assert counter.count("") == 0
    assert counter.count("hello world") == 2
    assert counter.count("hello " * 1000) == 1000


def test_word_cache_gives_the_tokenizers_own_count(
    counter: TokenizerCounter, exact: TokenizerCounter
) -> None:
    alphabet = [*"aZ é東,.(→…\t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u2028\u3000\u200b\x00😀ﬁ", "word"]
    rng = random.Random(7)
    texts = ["".join(rng.choices(alphabet, k=rng.randint(0, 30))) for _ in range(3000)]

    assert [counter.count(t) for t in texts] == [exact.count(t) for t in texts]


def test_word_cache_stays_bounded(exact: TokenizerCounter) -> None:
    small = load_token_counter(word_cache_size=10)
    texts = [prose(seed, 30) for seed in range(20)]

    assert [small.count(t) for t in texts] == [exact.count(t) for t in texts]
    assert small.cached_words <= 10


def test_counter_leaves_the_given_tokenizer_untouched() -> None:
    tokenizer = Tokenizer.from_file(str(default_tokenizer_path()))

    TokenizerCounter(tokenizer).count("hello")

    assert tokenizer.truncation is not None
    assert tokenizer.padding is not None


def test_approx_counter_rounds_characters_over_four_up() -> None:
    approx = ApproxTokenCounter()

    assert [approx.count(t) for t in ("", "abc", "abcd", "abcde")] == [0, 1, 1, 2]
    with pytest.raises(ValueError, match="chars_per_token"):
        ApproxTokenCounter(0)
