"""The choices a caller names and the defaults they fall back to: standard library only, so
every door (the command line's option parsing included) can use them without loading the
database layer or the model."""

from __future__ import annotations

from enum import StrEnum


class SearchMode(StrEnum):
    VECTOR = "vector"
    KEYWORD = "keyword"
    HYBRID = "hybrid"


class FusionMethod(StrEnum):
    RRF = "rrf"
    WEIGHTED = "weighted"


class CitationStyle(StrEnum):
    NUMBERED = "numbered"
    INLINE = "inline"
    COMPACT = "compact"


class SearchScope(StrEnum):
    CURRENT = "current"  # the item's own collection
    SHARED = "shared"  # the item's collection and the collection named "shared"
    ALL = "all"  # every collection of the tenant


class MergeStrategy(StrEnum):
    KEEP_NEWEST = "keep_newest"
    KEEP_OLDEST = "keep_oldest"
    KEEP_MOST_RETURNED = "keep_most_accessed"  # the most often returned (a wire name kept)


MAX_RESULTS = 100  # a search's max_results, at most
DEFAULT_MAX_RESULTS = 5
DEFAULT_MAX_TOKENS = 2000  # a context's budget
DEFAULT_MAX_CHARS = 500  # a context block's text, at most
DEFAULT_SIMILAR_TOP_K = 10
MAX_SIMILAR_TOP_K = 100  # similar items one question returns, at most
DEFAULT_MIN_SIMILARITY = 0.85
DEFAULT_DUPLICATE_THRESHOLD = 0.95
DEFAULT_DEDUPE_LIMIT = 1_000
MAX_DEDUPE_LIMIT = 50_000  # documents one dedupe examines, at most
