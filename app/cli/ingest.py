"""`rag ingest PATH… --tenant T` in this process: a progress bar, batches of files."""

from __future__ import annotations

import anyio
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from app.cli.files import SourceFile
from app.cli.services import Services
from app.cli.views import Summary
from app.errors import AppError, PayloadTooLarge, Unprocessable
from app.ingest.documents import ingest_documents
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import sniff_source_type

BATCH_FILES = 32  # files per call to the service
BATCH_BYTES = 32 * 2**20  # or fewer, when they are this large together


async def ingest_files(
    services: Services,
    files: list[SourceFile],
    *,
    tenant_id: str,
    collection: str,
    access: tuple[str, ...] = (),
    console: Console,
) -> Summary:
    """Files go to the service in batches (one embedding call and one write transaction per
    batch; each file still all-or-nothing)."""
    summary = Summary(files=len(files))
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    batch: list[tuple[SourceFile, DocumentInput]] = []
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("ingesting", total=len(files))

        async def flush() -> None:
            await _ingest_batch(services, batch, tenant_id=tenant_id, summary=summary)
            progress.advance(task, len(batch))
            batch.clear()

        for file in files:
            progress.update(task, description=file.external_id[-40:])
            try:
                document = await _read(services, file, collection=collection, access=access)
                batch.append((file, document))
            except AppError as error:
                summary.failed[file.external_id] = error.detail
                progress.advance(task)
            except OSError as error:
                summary.failed[file.external_id] = error.strerror or str(error)
                progress.advance(task)
            if len(batch) >= BATCH_FILES or _size(batch) >= BATCH_BYTES:
                await flush()
        if batch:
            await flush()
    return summary


def _size(batch: list[tuple[SourceFile, DocumentInput]]) -> int:
    return sum(len(document.content) for _, document in batch)


async def _read(
    services: Services, file: SourceFile, *, collection: str, access: tuple[str, ...]
) -> DocumentInput:
    limit = services.settings.upload_max_bytes
    path = anyio.Path(file.path)
    if (await path.stat()).st_size > limit:
        raise PayloadTooLarge(f"larger than {limit} bytes (RAG_UPLOAD_MAX_BYTES)")
    data = await path.read_bytes()
    if not data:
        raise Unprocessable("the file is empty")
    return DocumentInput(
        content=data,
        source_type=sniff_source_type(data, filename=file.path.name, declared=None),
        external_id=file.external_id,
        collection=collection,
        metadata={"filename": file.path.name},
        access=access,
    )


async def _ingest_batch(
    services: Services,
    batch: list[tuple[SourceFile, DocumentInput]],
    *,
    tenant_id: str,
    summary: Summary,
) -> None:
    outcomes = await ingest_documents(
        services.sessions,
        services.embedder,
        chunker=services.chunker,
        tenant_id=tenant_id,
        documents=[document for _, document in batch],
        parser=services.parser,
    )
    for (file, _), outcome in zip(batch, outcomes, strict=True):
        if isinstance(outcome, AppError):
            summary.failed[file.external_id] = outcome.detail
        else:
            summary.chunks += outcome.chunks
            summary.embedded += outcome.embedded
            summary.unchanged += outcome.unchanged
