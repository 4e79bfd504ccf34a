"""Typed requests and replies of similar items and near-duplicate documents."""

from __future__ import annotations

import uuid
from enum import StrEnum

from pydantic import Field, JsonValue

from rag_client.models import Body, Reply


class SearchScope(StrEnum):
    CURRENT = "current"
    SHARED = "shared"
    ALL = "all"


class SimilarChunk(Reply):
    """A search-style chunk like the one asked about."""

    chunk_id: uuid.UUID
    document_id: uuid.UUID
    content: str
    similarity: float
    title: str
    source_type: str
    external_id: str | None = None
    collection: str | None = None
    score: float | None = None
    source_url: str | None = None
    page_number: int | None = None
    section: list[str] = Field(default_factory=list)
    chunk_index: int | None = None
    total_chunks: int | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)


class SimilarResult(Reply):
    similar: list[SimilarChunk]


class DedupeRequest(Body):
    similarity_threshold: float | None = None
    dry_run: bool = True
    merge_strategy: str | None = None
    collections: list[str] | None = None


class DuplicateGroup(Reply):
    primary_id: uuid.UUID
    duplicate_ids: list[uuid.UUID]
    avg_similarity: float


class DedupeResult(Reply):
    duplicate_groups: list[DuplicateGroup]
    total_duplicates: int
    dry_run: bool
