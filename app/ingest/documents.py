"""Ingest documents: parse, chunk, embed what changed, store each new version whole.

Idempotent by (collection, external_id). A chunk is embedded again only when the text that
is embedded (contextual header included) or the model changed; a document whose content
hash and model are unchanged is not written at all.

A batch is worked as a batch: parsing and chunking in one worker-thread call, one query for
what the documents hold now, one embedding call for every new text (the embedder cuts it into
sub-batches of similar length), and one write transaction holding a few multi-row statements.
Each document is still all-or-nothing: every failure (parser, embedder, database) happens
before or inside the write transaction, so the previous version stays as it was and no
partial new version is ever visible. When the database refuses one document of a batch
(a constraint, a value it cannot store), the transaction is rolled back and the documents
are written one transaction each, so only that document fails.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio
from sqlalchemy.exc import DBAPIError

from app.db.tenancy import SessionMaker, readers_of_sessions, tenant_transaction
from app.embeddings import Embedder
from app.errors import AppError, Conflict, Unprocessable
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
    write_versions,
)
from app.ingest.versions import (
    IngestResult,
    Pending,
    new_version,
    unchanged_result,
    written_result,
)
from app.observability.metrics import INGESTED_CHUNKS, INGESTED_DOCUMENTS

INLINE = Parser()  # default limits, PDFs read in the calling thread


async def ingest_document(
    sessions: SessionMaker,
    embedder: Embedder,
    *,
    chunker: Chunker,
    tenant_id: str,
    document: DocumentInput,
    parser: Parser = INLINE,
) -> IngestResult:
    """Ingest one document; its failure is raised."""
    [outcome] = await ingest_documents(
        sessions,
        embedder,
        chunker=chunker,
        tenant_id=tenant_id,
        documents=[document],
        parser=parser,
    )
    if isinstance(outcome, AppError):
        raise outcome
    return outcome


async def ingest_documents(
    sessions: SessionMaker,
    embedder: Embedder,
    *,
    chunker: Chunker,
    tenant_id: str,
    documents: Sequence[DocumentInput],
    parser: Parser = INLINE,
) -> list[IngestResult | AppError]:
    """Ingest a batch; one outcome per document, in order: its result or why it failed.

    The same (collection, external_id) twice in a batch is applied in order, as if the
    documents had come one after the other. `parser` holds each document to the parse limits
    (app/ingest/parsing/limits.py); the service's reads PDFs in a killable sandbox."""
    outcomes: list[IngestResult | AppError | None] = [None] * len(documents)
    prepared = await anyio.to_thread.run_sync(prepare_all, documents, chunker, embedder, parser)
    readers = readers_of_sessions(sessions)
    pending: list[Pending] = []
    for index, (document, ready) in enumerate(zip(documents, prepared, strict=True)):
        if not isinstance(ready, AppError) and not readers.may_see(document.access):
            ready = Unprocessable(
                "access: the list must name you (user:<your subject>) or one of your groups: "
                "you could not see the document",
                extra={"errors": [{"field": "access", "message": "excludes the caller"}]},
            )
        if isinstance(ready, AppError):
            outcomes[index] = ready
            continue
        external_id = document.external_id or sha256(document.content)
        content_hash = sha256(fingerprint(document, ready.title, embedder.model_id))
        pending.append(Pending(index, document, ready, external_id, content_hash))
    for round_ in _rounds(pending):
        for item, outcome in await _ingest_round(sessions, embedder, tenant_id, round_):
            outcomes[item.index] = outcome
    done = [outcome for outcome in outcomes if outcome is not None]
    _count(done)
    return done


def _count(outcomes: Sequence[IngestResult | AppError]) -> None:
    """rag_ingest_documents_total by outcome, rag_ingest_chunks_total (chunks written)."""
    written = [o for o in outcomes if isinstance(o, IngestResult) and o.changed]
    INGESTED_DOCUMENTS.labels("written").inc(len(written))
    INGESTED_DOCUMENTS.labels("failed").inc(sum(isinstance(o, AppError) for o in outcomes))
    unchanged = sum(isinstance(o, IngestResult) and not o.changed for o in outcomes)
    INGESTED_DOCUMENTS.labels("unchanged").inc(unchanged)
    INGESTED_CHUNKS.inc(sum(o.chunks for o in written))


def _rounds(pending: list[Pending]) -> list[list[Pending]]:
    """Split so that no round holds a document key twice; later copies go to later rounds."""
    rounds: list[list[Pending]] = []
    seen: dict[DocumentKey, int] = {}
    for item in pending:
        level = seen.get(item.key, -1) + 1
        seen[item.key] = level
        if level == len(rounds):
            rounds.append([])
        rounds[level].append(item)
    return rounds


async def _ingest_round(
    sessions: SessionMaker, embedder: Embedder, tenant_id: str, items: list[Pending]
) -> list[tuple[Pending, IngestResult | AppError]]:
    model_id = embedder.model_id
    done: list[tuple[Pending, IngestResult | AppError]] = []
    changed: list[Pending] = []
    async with tenant_transaction(sessions, tenant_id) as session:
        previous = await stored_versions(session, [item.key for item in items])
        for item in items:
            stored = previous.get(item.key)
            if stored is None and (other := _under_other_access(item, previous)) is not None:
                done.append((item, other))
            elif stored is not None and _is_unchanged(item, stored, model_id):
                done.append((item, unchanged_result(stored, item)))
            else:
                changed.append(item)
        known = await reusable_vectors(
            session,
            [previous[i.key].document_id for i in changed if i.key in previous],
            model_id=model_id,
            hashes={h for i in changed if i.document.chunks is None for h in i.prepared.hashes},
        )
    fresh, failure = await _embed_missing(embedder, changed, known)
    ready = []
    for item in changed:
        if failure is not None and _needs_embedding(item, known):
            done.append((item, failure))
        else:
            ready.append(item)
    versions = [new_version(item, {**known, **fresh}, model_id) for item in ready]
    for item, outcome in await _write(sessions, tenant_id, ready, versions):
        done.append(
            (
                item,
                written_result(item, outcome, known) if isinstance(outcome, Written) else outcome,
            )
        )
    return done


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
    text once); an embedder failure fails the documents that needed it, not the others."""
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


async def _write(
    sessions: SessionMaker, tenant_id: str, items: list[Pending], versions: list[NewVersion]
) -> list[tuple[Pending, Written | AppError]]:
    """All in one transaction; if the database refuses any of them, each in its own."""
    if not versions:
        return []
    try:
        async with tenant_transaction(sessions, tenant_id) as session:
            written = await write_versions(session, tenant_id, versions)
        return list(zip(items, written, strict=True))
    except DBAPIError as error:
        if not _refused_by_content(error):
            raise
        if len(versions) == 1:
            return [(items[0], _refusal(error))]
    return [
        (item, await _write_alone(sessions, tenant_id, version))
        for item, version in zip(items, versions, strict=True)
    ]


async def _write_alone(
    sessions: SessionMaker, tenant_id: str, version: NewVersion
) -> Written | AppError:
    try:
        async with tenant_transaction(sessions, tenant_id) as session:
            [written] = await write_versions(session, tenant_id, [version])
    except DBAPIError as error:
        if not _refused_by_content(error):
            raise
        return _refusal(error)
    return written


def _refused_by_content(error: DBAPIError) -> bool:
    """SQLSTATE class 22 (data exception) or 23 (integrity constraint): the document's values
    are the cause. Anything else (a lost connection, a timeout) is the database's problem."""
    sqlstate = getattr(error.orig, "sqlstate", None) or ""
    return sqlstate[:2] in {"22", "23"}


def _refusal(error: DBAPIError) -> AppError:
    reason = str(error.orig).strip().splitlines()[0]
    return Unprocessable(f"the database refused the document: {reason}")
