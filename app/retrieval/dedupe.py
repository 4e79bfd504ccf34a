"""Near-duplicate documents: find them (groups), and merge them (keep one per group).

Pairs: two documents are near-duplicates when the cosine similarity of their document vectors
(app/retrieval/similar.py) is at or above the threshold. Groups are the connected components of
those pairs (union-find).

Candidate pairs come from the documents' HNSW index: one k-nearest-neighbour probe per examined
document (`NEIGHBOURS` of them), batched in LATERAL statements of `PROBE_BATCH` documents, under
the same index settings as search (`hnsw.ef_search`, iterative scans). That is N·k·log N work
for N documents, not the N² pairs of an exact comparison. A group larger than k+1 is still
found when its members chain through each other's k nearest. `use_index=False` compares every
pair exactly (numpy, on the stored vectors: duplicates.py), allowed up to `EXACT_MAX_DOCUMENTS`.

A preview says what differs between the copies of a group: each duplicate's text (its chunks)
against the primary's, word by word, as bounded passages (differences.py), for the first
`COMPARED_GROUPS` groups, so a person sees what a merge would lose before choosing what to keep.

Merging re-checks inside its own transaction: the group's documents are locked (FOR UPDATE),
a document that changed since it was examined (`updated_at`) or vanished is neither deleted nor
kept as primary, and the remaining ones are regrouped from their current vectors; only those
still connected to the primary are deleted (their chunks go by cascade). A second run finds
nothing more to remove.

Permissions: only documents the caller may see are examined (row-level security), so a group
never shows or deletes one it cannot see. Two documents with different access lists are not
duplicates of each other unless `across_access` is asked for: merging them would take a
document from the readers of one list and leave its text to the readers of the other.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from sqlalchemy import bindparam, delete, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import bm25_upkeep
from app.db.models import Chunk, Collection, Document
from app.db.tenancy import SessionMaker, tenant_transaction
from app.errors import Unprocessable
from app.inputs.vocabulary import MAX_DEDUPE_LIMIT
from app.observability.metrics import DEDUPE_REMOVED, DEDUPE_RUNS
from app.retrieval.differences import compare, joined
from app.retrieval.duplicates import (
    DuplicateGroup,
    Examined,
    MergeStrategy,
    components,
    exact_pairs,
    group_of,
    pair_key,
)
from app.retrieval.planning import index_settings

NEIGHBOURS = 10
# ef_search of the probes, at least (a request may ask for more). bench/similar_bench.py: at
# 10,000 documents 40 finds every planted pair and 100 costs 3x the time; at 50,000 documents
# 40 missed 11 of 1,000 pairs and 100 missed 1, for 1.3x the time.
PROBE_EF_SEARCH = 40
PROBE_BATCH = 256
EXACT_MAX_DOCUMENTS = 5_000
COMPARED_GROUPS = 100  # groups whose copies' texts a preview compares (the largest first)
COMPARED_COPIES = 10  # duplicates of a group compared with its primary


@dataclass(frozen=True, slots=True)
class DedupeRequest:
    similarity_threshold: float = 0.95
    dry_run: bool = True
    # None: not chosen. The primaries are then the last ingested, and a merge goes ahead only
    # where every copy was compared and found identical to its primary (`unchosen_refusal`).
    merge_strategy: MergeStrategy | None = None
    limit: int = 1_000
    collections: Sequence[str] | None = None
    use_index: bool = True
    ef_search: int | None = None  # None: PROBE_EF_SEARCH
    across_access: bool = False  # pair documents whose access lists differ

    @property
    def strategy(self) -> MergeStrategy:
        return self.merge_strategy or MergeStrategy.KEEP_NEWEST


@dataclass(frozen=True, slots=True)
class DedupeOutcome:
    groups: list[DuplicateGroup]
    examined: int
    dry_run: bool
    removed: list[uuid.UUID] = field(default_factory=list)
    merge_strategy: MergeStrategy = MergeStrategy.KEEP_NEWEST  # the strategy of the primaries

    @property
    def total_duplicates(self) -> int:
        return sum(len(group.duplicates) for group in self.groups)


def check(request: DedupeRequest) -> None:
    """422 naming the field for requests the service does not take."""
    if not 1 <= request.limit <= MAX_DEDUPE_LIMIT:
        _bad("limit", f"between 1 and {MAX_DEDUPE_LIMIT}")
    if not 0.0 <= request.similarity_threshold <= 1.0:
        _bad("similarity_threshold", "between 0.0 and 1.0")
    if not request.use_index and request.limit > EXACT_MAX_DOCUMENTS:
        _bad("use_index", f"an exact comparison takes at most {EXACT_MAX_DOCUMENTS} documents")


def _bad(name: str, message: str) -> None:
    raise Unprocessable(
        f"{name}: {message}", extra={"errors": [{"field": name, "message": message}]}
    )


async def dedupe(
    sessions: SessionMaker, *, tenant_id: str, model_id: str, request: DedupeRequest
) -> DedupeOutcome:
    """Find the tenant's near-duplicate groups; unless `dry_run`, merge them."""
    found = await find_duplicates(sessions, tenant_id=tenant_id, model_id=model_id, request=request)
    if request.dry_run:
        return found
    if request.merge_strategy is None and (refusal := unchosen_refusal(found.groups)):
        raise Unprocessable(
            f"merge_strategy: {refusal}",
            extra={"errors": [{"field": "merge_strategy", "message": refusal}]},
        )
    return await merge_duplicates(
        sessions,
        tenant_id=tenant_id,
        groups=found.groups,
        request=request,
        examined=found.examined,
    )


def unchosen_refusal(groups: Sequence[DuplicateGroup]) -> str | None:
    """Why a merge that names no strategy may not go ahead: some copy differs from the one
    the default would keep (or was not compared). None when every copy is identical."""
    differing = [
        g
        for g in groups
        if len(g.differences) < len(g.duplicates) or any(not d.identical for d in g.differences)
    ]
    if not differing:
        return None
    first = differing[0]
    return (
        f"the copies differ in {len(differing)} of {len(groups)} groups (the first: "
        f"{first.primary.collection}/{first.primary.external_id}); read the preview's "
        "differences, then name the copy to keep: keep_latest_version, keep_newest (last "
        "ingested), keep_oldest (first ingested) or keep_most_accessed (most returned)"
    )


async def find_duplicates(
    sessions: SessionMaker, *, tenant_id: str, model_id: str, request: DedupeRequest
) -> DedupeOutcome:
    """The groups, primary chosen by the strategy; changes nothing."""
    check(request)
    DEDUPE_RUNS.labels("true" if request.dry_run else "false").inc()
    async with tenant_transaction(
        sessions,
        tenant_id,
        settings=index_settings(max(request.ef_search or 0, PROBE_EF_SEARCH), tenant_id),
    ) as session:
        docs = await _examined(session, tenant_id, model_id, request)
        ids = list(docs)
        if request.use_index:
            pairs = await _index_pairs(session, tenant_id, model_id, ids, request)
        else:
            pairs = await _exact_pairs(session, ids, request.similarity_threshold)
        pairs = _same_access(pairs, docs, request)
        groups = [
            group_of([docs[i] for i in members], edges, request.strategy)
            for members, edges in components(pairs)
        ]
        groups.sort(key=lambda g: (-len(g.duplicates), -g.avg_similarity, str(g.primary.id)))
        groups = await _with_differences(session, tenant_id, groups)
    return DedupeOutcome(
        groups=groups, examined=len(docs), dry_run=True, merge_strategy=request.strategy
    )


async def _with_differences(
    session: AsyncSession, tenant_id: str, groups: list[DuplicateGroup]
) -> list[DuplicateGroup]:
    """The groups, the first `COMPARED_GROUPS` with what differs between their copies: each
    of the first `COMPARED_COPIES` duplicates against the primary (app/retrieval/differences.py)."""
    compared = groups[:COMPARED_GROUPS]
    wanted = [d.id for g in compared for d in (g.primary, *g.duplicates[:COMPARED_COPIES])]
    if not wanted:
        return groups
    rows = await session.execute(
        select(Chunk.document_id, Chunk.content)
        .where(Chunk.tenant_id == tenant_id, Chunk.document_id.in_(wanted))
        .order_by(Chunk.document_id, Chunk.chunk_index)
    )
    chunks: dict[uuid.UUID, list[str]] = {}
    for document_id, content in rows:
        chunks.setdefault(document_id, []).append(content)
    texts = {i: joined(parts) for i, parts in chunks.items()}
    return [
        replace(
            g,
            differences=tuple(
                compare(g.primary.id, texts.get(g.primary.id, ""), d.id, texts.get(d.id, ""))
                for d in g.duplicates[:COMPARED_COPIES]
            ),
        )
        for g in compared
    ] + groups[COMPARED_GROUPS:]


async def _examined(
    session: AsyncSession, tenant_id: str, model_id: str, request: DedupeRequest
) -> dict[uuid.UUID, Examined]:
    stmt = (
        select(
            Document.id,
            Document.title,
            Collection.name,
            Document.external_id,
            Document.created_at,
            Document.updated_at,
            Document.returned_count,
            Document.access,
            Document.version,
        )
        .join(
            Collection,
            (Collection.tenant_id == Document.tenant_id)
            & (Collection.id == Document.collection_id),
        )
        .where(
            Document.tenant_id == tenant_id,
            Document.embedding_model == model_id,
            Document.embedding.is_not(None),
        )
        .order_by(Document.created_at, Document.id)
        .limit(request.limit)
    )
    if request.collections is not None:
        stmt = stmt.where(Collection.name.in_(list(request.collections)))
    return {
        row[0]: Examined(*row[:7], access=tuple(row[7]), version=row[8])
        for row in await session.execute(stmt)
    }


def _same_access(
    pairs: dict[tuple[uuid.UUID, uuid.UUID], float],
    docs: dict[uuid.UUID, Examined],
    request: DedupeRequest,
) -> dict[tuple[uuid.UUID, uuid.UUID], float]:
    """The pairs whose two documents share their access list (all of them `across_access`)."""
    if request.across_access:
        return pairs
    return {(a, b): s for (a, b), s in pairs.items() if docs[a].access == docs[b].access}


# One LATERAL k-NN probe of the documents' HNSW index per listed document. The tenant and model
# are constants beside RLS (as in search), so the planner may use the index or, for a small
# tenant, the tenant btree (exact).
PROBES = text(
    """
    SELECT d.id AS a, n.id AS b, 1 - n.distance AS similarity
    FROM documents d
    CROSS JOIN LATERAL (
        SELECT o.id, o.embedding <=> d.embedding AS distance
        FROM documents o
        WHERE o.tenant_id = :tenant AND o.embedding_model = :model AND o.id <> d.id
        ORDER BY o.embedding <=> d.embedding
        LIMIT :k
    ) n
    WHERE d.tenant_id = :tenant AND d.id = ANY(:ids)
    """
).bindparams(bindparam("ids"))


async def _index_pairs(
    session: AsyncSession,
    tenant_id: str,
    model_id: str,
    ids: Sequence[uuid.UUID],
    request: DedupeRequest,
) -> dict[tuple[uuid.UUID, uuid.UUID], float]:
    examined = set(ids)
    pairs: dict[tuple[uuid.UUID, uuid.UUID], float] = {}
    for start in range(0, len(ids), PROBE_BATCH):
        batch = list(ids[start : start + PROBE_BATCH])
        params = {"tenant": tenant_id, "model": model_id, "k": NEIGHBOURS, "ids": batch}
        for a, b, similarity in await session.execute(PROBES, params):
            if similarity >= request.similarity_threshold and b in examined:
                pairs[pair_key(a, b)] = max(float(similarity), pairs.get(pair_key(a, b), 0.0))
    return pairs


async def _exact_pairs(
    session: AsyncSession, ids: Sequence[uuid.UUID], threshold: float
) -> dict[tuple[uuid.UUID, uuid.UUID], float]:
    if len(ids) < 2:
        return {}
    rows = await session.execute(
        select(Document.id, Document.embedding).where(Document.id.in_(list(ids)))
    )
    order, vectors = zip(*[(row[0], row[1]) for row in rows], strict=True)
    return exact_pairs(list(order), np.asarray(vectors, dtype=np.float32), threshold)


async def merge_duplicates(
    sessions: SessionMaker,
    *,
    tenant_id: str,
    groups: Sequence[DuplicateGroup],
    request: DedupeRequest,
    examined: int,
) -> DedupeOutcome:
    """Delete each group's duplicates in one transaction, re-checked against the evidence."""
    kept: list[DuplicateGroup] = []
    removed: list[uuid.UUID] = []
    async with tenant_transaction(sessions, tenant_id) as session:
        for group in groups:
            merged = await _recheck(session, group, request)
            if merged is None:
                continue
            ids = [d.id for d in merged.duplicates]
            await bm25_upkeep.remove_documents(session, tenant_id, ids)
            await session.execute(
                delete(Document).where(Document.tenant_id == tenant_id, Document.id.in_(ids))
            )
            removed.extend(ids)
            kept.append(merged)
    DEDUPE_REMOVED.inc(len(removed))
    return DedupeOutcome(
        groups=kept,
        examined=examined,
        dry_run=False,
        removed=removed,
        merge_strategy=request.strategy,
    )


async def _recheck(
    session: AsyncSession, group: DuplicateGroup, request: DedupeRequest
) -> DuplicateGroup | None:
    """The group as it stands now (rows locked), or None when nothing is left to delete."""
    seen = {d.id: d for d in (group.primary, *group.duplicates)}
    rows = await session.execute(
        select(Document.id, Document.updated_at, Document.embedding)
        .where(Document.id.in_(list(seen)))
        .order_by(Document.id)
        .with_for_update()
    )
    current = {
        row.id: row.embedding
        for row in rows
        if row.embedding is not None and row.updated_at == seen[row.id].updated_at
    }
    if group.primary.id not in current:
        return None  # the primary changed or went: decide again on a fresh run
    ids = list(current)
    pairs = exact_pairs(ids, np.asarray([current[i] for i in ids]), request.similarity_threshold)
    pairs = _same_access(pairs, seen, request)
    for members, edges in components(pairs):
        if group.primary.id in members:
            duplicates = [seen[i] for i in members if i != group.primary.id]
            return DuplicateGroup(
                primary=group.primary,
                duplicates=sorted(duplicates, key=lambda d: str(d.id)),
                avg_similarity=round(sum(edges) / len(edges), 6),
                differences=tuple(d for d in group.differences if d.document_id in members),
            )
    return None
