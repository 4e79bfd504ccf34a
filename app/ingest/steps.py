"""The steps a group of documents goes through on its way into the database: prepared (parsed,
chunked, checked), cut into rounds that hold a document key once, looked up (what is stored
now, which vectors can be reused), embedded (only what has no vector yet), written
(writing.py); and the metrics of the outcomes. The pipeline (pipeline.py) runs them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy.ext.asyncio import AsyncSession

from app.embeddings import Embedder
from app.errors import AppError, Conflict, Unprocessable
from app.ingest.allowance import ChunkAllowance
from app.ingest.chunking import Chunker
from app.ingest.inputs import DocumentInput, fingerprint, prepare_all, sha256
from app.ingest.parsing import Parser
from app.ingest.store import (
    DocumentKey,
    NewVersion,
    StoredVersion,
    Written,
    reusable_vectors,
    stored_versions,
)
from app.ingest.versions import (
    IngestResult,
    Pending,
    new_version,
    unchanged_result,
    written_result,
)
from app.observability.metrics import INGESTED_CHUNKS, INGESTED_DOCUMENTS
from app.permissions import Readers

Outcome = IngestResult | AppError


def prepare_slice(
    documents: Sequence[DocumentInput],
    *,
    start: int,
    chunker: Chunker,
    embedder: Embedder,
    parser: Parser,
    readers: Readers,
    allowance: ChunkAllowance | None = None,
) -> list[Pending | AppError]:
    """Parse, chunk and check each document; `start` is the first one's index in the stream.
    CPU-bound: runs in a worker thread."""
    out: list[Pending | AppError] = []
    prepared = prepare_all(documents, chunker, embedder, parser, allowance=allowance)
    for index, (document, ready) in enumerate(zip(documents, prepared, strict=True), start):
        if not isinstance(ready, AppError) and not readers.may_see(document.access):
            ready = Unprocessable(
                "access: the list must name you (user:<your subject>) or one of your groups: "
                "you could not see the document",
                extra={"errors": [{"field": "access", "message": "excludes the caller"}]},
            )
        if isinstance(ready, AppError):
            out.append(ready)
            continue
        external_id = document.external_id or sha256(document.content)
        content_hash = sha256(fingerprint(document, ready.title, embedder.model_id))
        out.append(Pending(index, document, ready, external_id, content_hash))
    return out


def rounds(pending: list[Pending]) -> list[list[Pending]]:
    """Split so that no round holds a document key twice; later copies go to later rounds."""
    split: list[list[Pending]] = []
    seen: dict[DocumentKey, int] = {}
    for item in pending:
        level = seen.get(item.key, -1) + 1
        seen[item.key] = level
        if level == len(split):
            split.append([])
        split[level].append(item)
    return split


@dataclass(slots=True)
class Round:
    """A round's documents and what became of them so far."""

    items: list[Pending]
    done: list[tuple[Pending, Outcome]] = field(default_factory=list)
    changed: list[Pending] = field(default_factory=list)  # to be written
    known: dict[str, list[float]] = field(default_factory=dict)  # stored vectors to reuse
    versions: list[NewVersion] = field(default_factory=list)  # for `changed`, once embedded


async def look_up(session: AsyncSession, work: Round, model_id: str) -> None:
    """Which documents are unchanged, under another access list, or to be written; and the
    stored vectors of the same texts under the same model."""
    previous = await stored_versions(session, [item.key for item in work.items])
    for item in work.items:
        stored = previous.get(item.key)
        if stored is None and (other := _under_other_access(item, previous)) is not None:
            work.done.append((item, other))
        elif stored is not None and _is_unchanged(item, stored, model_id):
            work.done.append((item, unchanged_result(stored, item)))
        else:
            work.changed.append(item)
    work.known = await reusable_vectors(
        session,
        [previous[i.key].document_id for i in work.changed if i.key in previous],
        model_id=model_id,
        hashes={h for i in work.changed if i.document.chunks is None for h in i.prepared.hashes},
    )


async def embed(embedder: Embedder, work: Round) -> None:
    """Embed what has no vector yet and build the new versions; an embedder failure fails the
    documents that needed it (they go to `done`), not the others."""
    fresh, failure = await _embed_missing(embedder, work.changed, work.known)
    ready = []
    for item in work.changed:
        if failure is not None and _needs_embedding(item, work.known):
            work.done.append((item, failure))
        else:
            ready.append(item)
    vectors = {**work.known, **fresh}
    work.changed = ready
    work.versions = [new_version(item, vectors, embedder.model_id) for item in ready]


def record_written(work: Round, written: list[tuple[Pending, Written | AppError]]) -> None:
    for item, outcome in written:
        if isinstance(outcome, Written):
            work.done.append((item, written_result(item, outcome, work.known)))
        else:
            work.done.append((item, outcome))


def count(outcomes: Sequence[Outcome]) -> None:
    """rag_ingest_documents_total by outcome, rag_ingest_chunks_total (chunks written)."""
    written = [o for o in outcomes if isinstance(o, IngestResult) and o.changed]
    INGESTED_DOCUMENTS.labels("written").inc(len(written))
    INGESTED_DOCUMENTS.labels("failed").inc(sum(isinstance(o, AppError) for o in outcomes))
    unchanged = sum(isinstance(o, IngestResult) and not o.changed for o in outcomes)
    INGESTED_DOCUMENTS.labels("unchanged").inc(unchanged)
    INGESTED_CHUNKS.inc(sum(o.chunks for o in written))


def _under_other_access(
    item: Pending, previous: dict[DocumentKey, StoredVersion]
) -> Conflict | None:
    """A 409 when the caller sees this collection and external id under another access list:
    ingesting would make a second document beside it (a list is changed with PATCH). Only
    documents the caller can see are in `previous`: an invisible one never answers."""
    collection, external_id, _ = item.key
    for (name, other_id, access), stored in previous.items():
        if (name, other_id) == (collection, external_id):
            return Conflict(
                f"document {stored.document_id} has external_id {external_id!r} in collection "
                f"{collection!r} with access {list(access)}: change its access with "
                f"PATCH /api/rag/documents/{stored.document_id}, or delete it first"
            )
    return None


def _is_unchanged(item: Pending, stored: StoredVersion, model: str) -> bool:
    return stored.content_hash == item.content_hash and stored.models <= {model}


def _needs_embedding(item: Pending, known: dict[str, list[float]]) -> bool:
    return item.document.chunks is None and any(h not in known for h in item.prepared.hashes)


async def _embed_missing(
    embedder: Embedder, items: list[Pending], known: dict[str, list[float]]
) -> tuple[dict[str, list[float]], AppError | None]:
    """One embedding call for every text of the round that has no vector yet (each distinct
    text once)."""
    text_of: dict[str, str] = {}
    for item in items:
        if item.document.chunks is None:
            for text_hash, text in zip(item.prepared.hashes, item.prepared.texts, strict=True):
                if text_hash not in known:
                    text_of.setdefault(text_hash, text)
    if not text_of:
        return {}, None
    try:
        vectors = await embedder.embed_documents(list(text_of.values()))
    except AppError as error:
        return {}, error
    return dict(zip(text_of, vectors, strict=True)), None
