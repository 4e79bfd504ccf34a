"""What a sync's or a deletion's receipt says (app/receipts.py signs and keeps it): the
documents written and deleted with their content hashes and versions, and what the deletion
removed with the check that nothing of it is left. One shape for a sync in a request and a
sync run as a background job."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.models import Document
from app.ingest.sync import Erased, Stored


async def sync_changes(
    session: AsyncSession,
    *,
    added: Sequence[str],
    updated: Sequence[str],
    unchanged: int,
    missing: Sequence[str],
    failed: Sequence[dict[str, Any]],
    written: Sequence[uuid.UUID],
    deleted: Sequence[Stored],
    erased: Erased,
) -> dict[str, Any]:
    """A sync receipt's body: the documents written (`written`: their ids) and deleted."""
    rows = await session.execute(
        select(Document.id, Document.external_id, Document.content_hash, Document.version).where(
            Document.id.in_(list(written))
        )
    )
    now = {external_id: (i, h, v) for i, external_id, h, v in rows}

    def entry(external_id: str) -> dict[str, Any]:
        document_id, content_hash, version = now[external_id]
        return {
            "external_id": external_id,
            "document_id": str(document_id),
            "content_hash": content_hash,
            "version": version,
        }

    return {
        "added": [entry(e) for e in added if e in now],
        "updated": [entry(e) for e in updated if e in now],
        "deleted": [deleted_entry(d) for d in deleted],
        "unchanged": unchanged,
        "missing": list(missing),
        "failed": list(failed),
        "erased": erased_entry(erased),
    }


def stored_of(document: Document) -> Stored:
    return Stored(
        document.id,
        document.external_id,
        document.version,
        document.content_hash,
        tuple(document.access),
        document.chunk_count,
    )


def deleted_entry(document: Stored) -> dict[str, Any]:
    return {
        "external_id": document.external_id,
        "document_id": str(document.document_id),
        "content_hash": document.content_hash,
        "version": document.version,
        "chunks": document.chunks,
    }


def erased_entry(erased: Erased) -> dict[str, Any]:
    """What the deletion removed and the check that nothing of it is left."""
    return {
        "documents": erased.documents,
        "chunks": erased.chunks,
        "vectors": erased.chunks + erased.documents,  # each chunk's, each document's mean
        "keyword_postings": erased.postings,
        "keyword_statistics": {
            "chunks_before": erased.corpus_chunks_before,
            "chunks_after": erased.corpus_chunks_after,
        },
        "remaining": {"chunks": erased.remaining_chunks, "postings": erased.remaining_postings},
        "gone": erased.remaining_chunks == 0 and erased.remaining_postings == 0,
    }
