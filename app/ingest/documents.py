"""Ingest documents: parse, chunk, embed what changed, store each new version whole.

Idempotent by (collection, external_id). A chunk is embedded again only when the text that
is embedded (contextual header included) or the model changed; a document whose content
hash and model are unchanged is not written at all.

A batch goes through a pipeline (pipeline.py): in slices of documents, parsing and chunking
of one slice, embedding of the one before and the database write of the one before that run
at the same time, each slice with one query for what its documents hold now, one embedding
call for its new texts and one write transaction. Memory stays flat whatever the batch size.
Each document is still all-or-nothing: every failure (parser, embedder, database) happens
before or inside the write transaction, so the previous version stays as it was and no
partial new version is ever visible. When the database refuses one document of a slice
(a constraint, a value it cannot store), the transaction is rolled back and the documents
are written one transaction each, so only that document fails. The same (collection,
external_id) twice is applied in order, however far apart; outcomes come in input order and
are counted once in the metrics.
"""

from __future__ import annotations

from collections.abc import Sequence

from app.db.tenancy import SessionMaker
from app.embeddings import Embedder
from app.errors import AppError
from app.ingest.chunking import Chunker
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import Parser
from app.ingest.pipeline import Limits, ingest_stream
from app.ingest.steps import Outcome
from app.ingest.versions import IngestResult

INLINE = Parser()  # default limits, PDFs read in the calling thread

__all__ = [
    "INLINE",
    "Limits",
    "ingest_document",
    "ingest_documents",
    "ingest_stream",
    "synchronous",
]


def synchronous(max_chunks: int) -> Limits:
    """The limits of an ingest the caller waits for: at most `max_chunks` chunks made across
    its documents (app/ingest/allowance.py; past it a 413 that says to use a job). Jobs and
    the command line run without this bound."""
    return Limits(max_chunks=max_chunks)


async def ingest_document(
    sessions: SessionMaker,
    embedder: Embedder,
    *,
    chunker: Chunker,
    tenant_id: str,
    document: DocumentInput,
    parser: Parser = INLINE,
    limits: Limits | None = None,
) -> IngestResult:
    """Ingest one document; its failure is raised."""
    [outcome] = await ingest_documents(
        sessions,
        embedder,
        chunker=chunker,
        tenant_id=tenant_id,
        documents=[document],
        parser=parser,
        limits=limits,
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
    limits: Limits | None = None,
) -> list[IngestResult | AppError]:
    """Ingest a batch; one outcome per document, in order: its result or why it failed.

    The same (collection, external_id) twice in a batch is applied in order, as if the
    documents had come one after the other. `parser` holds each document to the parse limits
    (app/ingest/parsing/limits.py); the service's reads PDFs in a killable sandbox.
    `limits.max_chunks` bounds the chunks the whole batch may make (`synchronous`)."""
    outcomes: list[Outcome] = []

    async def keep(_index: int, outcome: Outcome) -> None:
        outcomes.append(outcome)

    await ingest_stream(
        sessions,
        embedder,
        chunker=chunker,
        tenant_id=tenant_id,
        documents=documents,
        deliver=keep,
        parser=parser,
        limits=limits,
    )
    return outcomes
