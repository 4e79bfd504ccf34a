"""Similar items and near-duplicates: the inputs of app/inputs/similar.py through the domain."""

from __future__ import annotations

import uuid

from app.db.replicas import ReadConsistency
from app.db.tenancy import SessionMaker
from app.inputs.similar import DedupeInput, ItemKind, SimilarInput
from app.resources import Resources
from app.retrieval.dedupe import DedupeOutcome, DedupeRequest
from app.retrieval.dedupe import dedupe as find_or_merge
from app.retrieval.similar import (
    SimilarOutcome,
    SimilarRequest,
    similar_to_chunk,
    similar_to_document,
    similar_to_item,
)

REPLICA = ReadConsistency.REPLICA


async def similar(
    resources: Resources,
    tenant_id: str,
    item_id: uuid.UUID,
    asked: SimilarInput,
    *,
    kind: ItemKind = "either",
    consistency: ReadConsistency = REPLICA,
) -> SimilarOutcome:
    """Items like the chunk or document `item_id`, best first (404 when the tenant has no
    such item; on a replica, asked again of the primary before saying so). Each document
    returned is counted as returned once."""
    settings = resources.settings
    request = SimilarRequest(
        top_k=asked.top_k,
        min_similarity=asked.min_similarity,
        exclude_same_document=asked.exclude_same_document,
        scope=asked.scope,
        collections=asked.collections,
        ef_search=settings.search_ef_search_default,
        candidates=settings.search_candidates,
    )
    counter = resources.returns

    async def run(sessions: SessionMaker) -> SimilarOutcome:
        if kind == "chunk":
            return await similar_to_chunk(
                sessions, tenant_id=tenant_id, chunk_id=item_id, request=request, returns=counter
            )
        if kind == "document":
            return await similar_to_document(
                sessions, tenant_id=tenant_id, document_id=item_id, request=request, returns=counter
            )
        return await similar_to_item(
            sessions, tenant_id=tenant_id, item_id=item_id, request=request, returns=counter
        )

    return await resources.read(run, consistency=consistency, recheck_missing=True)


async def dedupe(
    resources: Resources,
    tenant_id: str,
    asked: DedupeInput,
    *,
    consistency: ReadConsistency = REPLICA,
) -> DedupeOutcome:
    """The tenant's near-duplicate groups; a dry run may read a replica, a merge (who may
    ask for one is the door's decision) reads and deletes on the primary."""
    request = DedupeRequest(
        similarity_threshold=asked.similarity_threshold,
        dry_run=asked.dry_run,
        merge_strategy=asked.merge_strategy,
        limit=asked.limit,
        collections=asked.collections,
        use_index=asked.use_index,
        ef_search=asked.ef_search or resources.settings.search_ef_search_default,
        across_access=asked.across_access,
    )

    async def run(sessions: SessionMaker) -> DedupeOutcome:
        return await find_or_merge(
            sessions, tenant_id=tenant_id, model_id=resources.embedder.model_id, request=request
        )

    if asked.dry_run:
        return await resources.read(run, consistency=consistency)
    return await run(resources.sessions)
