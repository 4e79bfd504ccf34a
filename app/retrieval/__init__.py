"""Nearest-chunk search with pgvector, keyword search, hybrid ranking; context; fetch by id."""

from app.retrieval.bm25 import Bm25Params
from app.retrieval.context import ContextOutcome, retrieve_context
from app.retrieval.fetch import Fetched, fetch_item
from app.retrieval.filters import MetadataCondition, SearchFilters
from app.retrieval.fusion import FusionMethod, fuse, weighted_fuse
from app.retrieval.hits import Hit, SearchOutcome
from app.retrieval.requests import SearchMode, SearchRequest, search_request
from app.retrieval.search import search
from app.retrieval.shortfall import Shortfall, ShortfallReason

__all__ = [
    "Bm25Params",
    "ContextOutcome",
    "Fetched",
    "FusionMethod",
    "Hit",
    "MetadataCondition",
    "SearchFilters",
    "SearchMode",
    "SearchOutcome",
    "SearchRequest",
    "Shortfall",
    "ShortfallReason",
    "fetch_item",
    "fuse",
    "retrieve_context",
    "search",
    "search_request",
    "weighted_fuse",
]
