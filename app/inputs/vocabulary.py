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
    """Which copy of a duplicate group a merge keeps; `STRATEGY_COMPARES` says by what."""

    KEEP_NEWEST = "keep_newest"  # the last ingested (or re-ingested)
    KEEP_OLDEST = "keep_oldest"  # the first ingested
    KEEP_MOST_RETURNED = "keep_most_accessed"  # the most often returned (a wire name kept)
    KEEP_LATEST_VERSION = "keep_latest_version"  # the source's latest `version`


STRATEGY_COMPARES = {
    MergeStrategy.KEEP_NEWEST: "last ingested: keeps the copy stored (or re-ingested) last",
    MergeStrategy.KEEP_OLDEST: "first ingested: keeps the copy stored first",
    MergeStrategy.KEEP_MOST_RETURNED: "most returned: keeps the copy searches returned most often",
    MergeStrategy.KEEP_LATEST_VERSION: "latest version: keeps the copy whose source `version` is "
    "latest, when every copy carries one that reads as an ISO 8601 time or as a number (all "
    "the same kind); otherwise the last ingested, and the preview says so",
}


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
