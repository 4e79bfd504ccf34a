"""Typed requests and replies of similar items and near-duplicate documents."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum

from pydantic import Field

from rag_client.models import Body, Chunk, Reply


class SearchScope(StrEnum):
    CURRENT = "current"  # the item's own collection
    SHARED = "shared"  # and the collection named "shared"
    ALL = "all"  # every collection of the tenant


class MergeStrategy(StrEnum):
    KEEP_NEWEST = "keep_newest"  # the last ingested
    KEEP_OLDEST = "keep_oldest"  # the first ingested
    KEEP_MOST_ACCESSED = "keep_most_accessed"  # the most often returned by searches
    KEEP_LATEST_VERSION = "keep_latest_version"  # the latest source version, if comparable


class SimilarResult(Reply):
    """Items like `item_id`, best first (for a document: each similar document's best chunk,
    with the documents' similarity)."""

    item_id: uuid.UUID
    kind: str
    similar_count: int
    similar: list[Chunk]


# Kept for callers that name it: a similar item is a search-style chunk.
SimilarChunk = Chunk


class DedupeRequest(Body):
    similarity_threshold: float | None = None
    dry_run: bool = True
    merge_strategy: MergeStrategy | None = None
    limit: int | None = None
    collections: list[str] | None = None
    use_index: bool | None = None
    ef_search: int | None = None
    across_access: bool | None = None


class DocumentRef(Reply):
    id: uuid.UUID
    title: str
    collection: str
    external_id: str
    created_at: datetime
    updated_at: datetime
    access_count: int
    access: list[str] = Field(default_factory=list)  # who may see it; empty: the whole tenant
    version: str | None = None  # the source's own revision, as given at ingestion


class Passage(Reply):
    """Where two copies differ: each side's text there (with context) and its changed words."""

    primary: str
    duplicate: str
    primary_changed: str
    duplicate_changed: str


class Difference(Reply):
    """A duplicate (`document_id`) compared with its group's primary (`compared_with`)."""

    document_id: uuid.UUID
    compared_with: uuid.UUID
    identical: bool
    passages: list[Passage] = Field(default_factory=list)
    passages_omitted: int = 0
    truncated: bool = False


class DuplicateGroup(Reply):
    primary_id: uuid.UUID
    primary_title: str
    duplicate_ids: list[uuid.UUID]
    duplicate_titles: list[str]
    avg_similarity: float
    documents: list[DocumentRef]
    # the document each merge strategy would keep (a strategy this client does not know: str)
    kept_by_strategy: dict[MergeStrategy | str, uuid.UUID] = Field(default_factory=dict)
    differences: list[Difference] = Field(default_factory=list)  # each duplicate vs the primary
    versions_compared: str | None = None  # number, iso_time, or None: versions do not compare
    notes: list[str] = Field(default_factory=list)


class DedupeResult(Reply):
    duplicate_groups: list[DuplicateGroup]
    merge_strategy: MergeStrategy | str | None = None  # the strategy of the primaries
    strategies: dict[MergeStrategy | str, str] = Field(default_factory=dict)  # what each compares
    total_duplicates: int
    dry_run: bool
    action: str
    documents_examined: int
    removed_ids: list[uuid.UUID]
