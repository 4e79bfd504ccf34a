"""Nearest-chunk search with pgvector, keyword search, hybrid ranking."""

from app.retrieval.filters import MetadataCondition, SearchFilters
from app.retrieval.search import Hit, SearchMode, SearchOutcome, SearchRequest, fuse, search

__all__ = [
    "Hit",
    "MetadataCondition",
    "SearchFilters",
    "SearchMode",
    "SearchOutcome",
    "SearchRequest",
    "fuse",
    "search",
]
