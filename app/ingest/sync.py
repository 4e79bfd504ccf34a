"""A collection made to hold what its source holds now (POST …/collections/{name}/sync,
`rag sync`): the caller names every document of the collection, in full or by reference.

`plan` compares the entries with the documents of the collection that the caller may see
(row-level security hides the others, which are then neither listed nor deleted):
- a full entry is ingested (added, updated, or unchanged when nothing it carries changed); a
  stored document with its external id under another access list is superseded, deleted;
- an entry a sync job has ingested already (`Ingested`, at the job's end) is kept, the
  documents of its external id under another access list deleted;
- a reference `(external_id, version)` is unchanged when a visible document with that external
  id has that version, and `missing` otherwise (the caller sends it in full; nothing changes);
- every visible document whose external id no entry names is deleted.

`erase` deletes documents in one transaction, their chunks and keyword postings with them and
the keyword statistics corrected, and returns what was removed, checked afterwards in the same
transaction: no chunk and no posting of those documents is left.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db import bm25_upkeep
from app.db.models import Bm25Corpus, Bm25Posting, Chunk, Collection, Document
from app.db.tenancy import tenant_of
from app.errors import Conflict
from app.ingest.catalog import DOCUMENT_COLLECTION
from app.ingest.entries import Ingested, Reference
from app.ingest.inputs import DocumentInput

Entry = DocumentInput | Reference | Ingested


@dataclass(frozen=True, slots=True)
class Stored:
    document_id: uuid.UUID
    external_id: str
    version: str | None
    content_hash: str
    access: tuple[str, ...]
    chunks: int


@dataclass(slots=True)
class Plan:
    ingest: list[DocumentInput] = field(default_factory=list)
    unchanged: list[Stored] = field(default_factory=list)  # by reference
    missing: list[Reference] = field(default_factory=list)
    delete: list[Stored] = field(default_factory=list)
    stored: dict[str, list[Stored]] = field(default_factory=dict)  # by external id


async def lock_collection(session: AsyncSession, tenant_id: str, collection: str) -> None:
    """Hold the (tenant, collection) sync lock until the session's transaction ends: two
    syncs of one collection, in requests or jobs, run one after the other."""
    key = func.hashtextextended(f"rag-sync/{tenant_id}/{collection}", 0)
    await session.execute(select(func.pg_advisory_xact_lock(key)))


def check_deletions(
    limit: int | float | None, deleting: int, visible: int, *, then: str = "nothing was changed"
) -> None:
    """409 when a sync would delete more than `limit` allows: a count, or a fraction of the
    `visible` documents; `then` says what that leaves."""
    if limit is None:
        return
    allowed = limit if isinstance(limit, int) else int(limit * visible)
    if deleting > allowed:
        raise Conflict(
            f"the sync would delete {deleting} of {visible} documents, more than "
            f"max_deletions allows ({allowed}); {then}",
            extra={"deleting": deleting, "allowed": allowed},
        )


async def stored_documents(session: AsyncSession, collection: str) -> list[Stored]:
    """The collection's documents that the session may see."""
    stmt = (
        select(
            Document.id,
            Document.external_id,
            Document.version,
            Document.content_hash,
            Document.access,
            Document.chunk_count,
        )
        .join(Collection, DOCUMENT_COLLECTION)
        .where(Collection.name == collection)
        .order_by(Document.external_id, Document.id)
    )
    rows = await session.execute(stmt)
    return [Stored(i, e, v, h, tuple(a), n) for i, e, v, h, a, n in rows]


def plan(entries: Sequence[object], stored: Sequence[Stored]) -> Plan:
    """What a sync of `entries` does to `stored` (external ids are unique among `entries`)."""
    by_id: dict[str, list[Stored]] = {}
    for document in stored:
        by_id.setdefault(document.external_id, []).append(document)
    result = Plan(stored=by_id)
    named: set[str] = set()
    for entry in entries:
        assert isinstance(entry, Entry)  # app/inputs/sync.py checked the entries
        assert entry.external_id
        named.add(entry.external_id)
        have = by_id.get(entry.external_id, [])
        if isinstance(entry, Reference):
            same = [d for d in have if d.version == entry.version]
            if same:
                result.unchanged.extend(same)
            else:
                result.missing.append(entry)
            continue
        if isinstance(entry, DocumentInput):
            result.ingest.append(entry)
        if entry.access is not None:  # superseded
            result.delete.extend(d for d in have if d.access != entry.access)
    result.delete.extend(d for d in stored if d.external_id not in named)
    result.delete.sort(key=lambda d: (d.external_id, str(d.document_id)))
    return result


@dataclass(frozen=True, slots=True)
class Erased:
    documents: int
    chunks: int
    postings: int  # keyword postings removed with them
    corpus_chunks_before: int  # the tenant's keyword statistics: chunks counted, before
    corpus_chunks_after: int
    remaining_chunks: int  # checked after the deletion: 0
    remaining_postings: int  # checked after the deletion: 0


async def erase(session: AsyncSession, document_ids: Sequence[uuid.UUID]) -> Erased:
    """Delete the documents (in the session's transaction) and show that nothing of them
    remains."""
    tenant_id = tenant_of(session)
    ids = list(document_ids)
    chunk_ids = list(
        await session.scalars(
            select(Chunk.id).where(Chunk.tenant_id == tenant_id, Chunk.document_id.in_(ids))
        )
    )
    postings = await _count_postings(session, tenant_id, chunk_ids)
    before = await _corpus_chunks(session, tenant_id)
    await bm25_upkeep.remove_documents(session, tenant_id, ids)
    if ids:
        await session.execute(
            delete(Document).where(Document.tenant_id == tenant_id, Document.id.in_(ids))
        )
    remaining = await session.scalar(
        select(func.count())
        .select_from(Chunk)
        .where(Chunk.tenant_id == tenant_id, Chunk.document_id.in_(ids))
    )
    return Erased(
        documents=len(ids),
        chunks=len(chunk_ids),
        postings=postings,
        corpus_chunks_before=before,
        corpus_chunks_after=await _corpus_chunks(session, tenant_id),
        remaining_chunks=int(remaining or 0),
        remaining_postings=await _count_postings(session, tenant_id, chunk_ids),
    )


async def _count_postings(
    session: AsyncSession, tenant_id: str, chunk_ids: Sequence[uuid.UUID]
) -> int:
    if not chunk_ids:
        return 0
    count = await session.scalar(
        select(func.count())
        .select_from(Bm25Posting)
        .where(Bm25Posting.tenant_id == tenant_id, Bm25Posting.chunk_id.in_(chunk_ids))
    )
    return int(count or 0)


async def _corpus_chunks(session: AsyncSession, tenant_id: str) -> int:
    count = await session.scalar(select(Bm25Corpus.chunks).where(Bm25Corpus.tenant_id == tenant_id))
    return int(count or 0)
