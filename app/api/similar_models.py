"""Request and response models of the similar and dedupe routes."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Self

from pydantic import BaseModel, Field

from app.api.search_models import ChunkOut
from app.inputs.replies import DifferenceOut
from app.inputs.similar import DedupeInput
from app.inputs.vocabulary import STRATEGY_COMPARES
from app.retrieval.dedupe import DedupeOutcome
from app.retrieval.duplicates import DuplicateGroup, Examined, MergeStrategy, primary_of, versions
from app.retrieval.similar import SimilarOutcome


class SimilarOut(BaseModel):
    item_id: uuid.UUID
    kind: str = Field(description="chunk or document")
    similar_count: int
    similar: list[ChunkOut] = Field(
        description="Best first. For a document: one entry per similar document, its best "
        "chunk, `similarity` the documents' similarity."
    )

    @classmethod
    def of(cls, outcome: SimilarOutcome) -> Self:
        return cls(
            item_id=outcome.item_id,
            kind=outcome.kind,
            similar_count=len(outcome.similar),
            similar=[ChunkOut.of(hit) for hit in outcome.similar],
        )


class DedupeIn(DedupeInput):
    """The body of POST /api/rag/dedupe."""


class DocumentRef(BaseModel):
    id: uuid.UUID
    title: str
    collection: str
    external_id: str
    created_at: datetime
    updated_at: datetime
    access_count: int = Field(description="How often search, context and similar returned it.")
    access: list[str] = Field(default_factory=list, description="Who may see it.")
    version: str | None = Field(
        default=None, description="The source's own revision of it, as given at ingestion."
    )

    @classmethod
    def of(cls, doc: Examined) -> Self:
        return cls(
            version=doc.version,
            id=doc.id,
            title=doc.title,
            collection=doc.collection,
            external_id=doc.external_id,
            created_at=doc.created_at,
            updated_at=doc.updated_at,
            access_count=doc.returned_count,
            access=list(doc.access),
        )


class GroupOut(BaseModel):
    primary_id: uuid.UUID
    primary_title: str
    duplicate_ids: list[uuid.UUID]
    duplicate_titles: list[str]
    avg_similarity: float
    documents: list[DocumentRef] = Field(description="The primary first, then the duplicates.")
    kept_by_strategy: dict[MergeStrategy, uuid.UUID] = Field(
        description="The document each merge strategy would keep (the primary is the one of "
        "the strategy asked for)."
    )
    differences: list[DifferenceOut] = Field(
        description="What differs between each duplicate and the primary: the passages a "
        "merge would lose (empty beyond the first 100 groups and 10 duplicates a group)."
    )
    versions_compared: str | None = Field(
        description="How keep_latest_version compares the copies' versions: number, iso_time, "
        "or null when they do not compare (it then keeps the last ingested; see notes)."
    )
    notes: list[str] = Field(description="What a person should know before merging the group.")

    @classmethod
    def of(cls, group: DuplicateGroup) -> Self:
        members = group.members
        compared = versions(members)
        notes = []
        if compared.kind is None:
            notes.append(
                f"keep_latest_version cannot compare versions here ({compared.reason}): "
                "it keeps the last ingested instead"
            )
        if any(not d.identical for d in group.differences):
            notes.append("the copies' texts differ: read the differences before choosing")
        return cls(
            differences=[DifferenceOut.of(d) for d in group.differences],
            versions_compared=compared.kind,
            notes=notes,
            primary_id=group.primary.id,
            primary_title=group.primary.title,
            duplicate_ids=[d.id for d in group.duplicates],
            duplicate_titles=[d.title for d in group.duplicates],
            avg_similarity=group.avg_similarity,
            documents=[DocumentRef.of(d) for d in members],
            kept_by_strategy={s: primary_of(members, s).id for s in MergeStrategy},
        )


class DedupeOut(BaseModel):
    duplicate_groups: list[GroupOut]
    merge_strategy: MergeStrategy = Field(description="The strategy of the primaries.")
    strategies: dict[MergeStrategy, str] = Field(
        default_factory=lambda: dict(STRATEGY_COMPARES),
        description="What each merge strategy compares.",
    )
    total_duplicates: int
    dry_run: bool
    action: str = Field(description="preview (nothing changed) or merged")
    documents_examined: int
    removed_ids: list[uuid.UUID]

    @classmethod
    def of(cls, outcome: DedupeOutcome) -> Self:
        return cls(
            duplicate_groups=[GroupOut.of(g) for g in outcome.groups],
            merge_strategy=outcome.merge_strategy,
            total_duplicates=outcome.total_duplicates,
            dry_run=outcome.dry_run,
            action="preview" if outcome.dry_run else "merged",
            documents_examined=outcome.examined,
            removed_ids=outcome.removed,
        )
