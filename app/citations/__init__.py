"""Citations and LLM context: ranked chunks in, numbered citations and a budgeted context out.

Pure domain code (no FastAPI, no database): `CitationGenerator` formats citations,
`build_context_with_citations` assembles a prompt context within a token budget,
`format_llm_response` appends the cited sources to an answer.
"""

from app.citations.context import (
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_TOKENS,
    ContextResult,
    FormattedAnswer,
    build_context_with_citations,
    format_chunk_for_context,
    format_llm_response,
)
from app.citations.generator import (
    SECTION_SEPARATOR,
    CitableChunk,
    Citation,
    CitationGenerator,
    CitationStyle,
)
from app.citations.metrics import ContextMetrics, context_metrics, quality_score
from app.citations.tokens import (
    ApproxTokenCounter,
    TokenCounter,
    TokenizerCounter,
    load_token_counter,
)

__all__ = [
    "DEFAULT_MAX_CHARS",
    "DEFAULT_MAX_TOKENS",
    "SECTION_SEPARATOR",
    "ApproxTokenCounter",
    "CitableChunk",
    "Citation",
    "CitationGenerator",
    "CitationStyle",
    "ContextMetrics",
    "ContextResult",
    "FormattedAnswer",
    "TokenCounter",
    "TokenizerCounter",
    "build_context_with_citations",
    "context_metrics",
    "format_chunk_for_context",
    "format_llm_response",
    "load_token_counter",
    "quality_score",
]
