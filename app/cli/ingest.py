"""`rag ingest PATH… --tenant T`: files and folders, a progress bar, a summary table."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from app.cli.services import Services
from app.errors import AppError, PayloadTooLarge, Unprocessable
from app.ingest.documents import DocumentInput, ingest_documents
from app.ingest.parsing import sniff_source_type

SKIPPED_NAMES = {".git", ".venv", "node_modules", "__pycache__"}
BATCH_FILES = 32  # files per call to the service
BATCH_BYTES = 32 * 2**20  # or fewer, when they are this large together


@dataclass(slots=True)
class Summary:
    files: int = 0
    chunks: int = 0
    embedded: int = 0
    unchanged: int = 0
    failed: dict[str, str] = field(default_factory=dict)


def collect(paths: Iterable[Path]) -> list[Path]:
    """The files named, and every file below the folders named (hidden ones skipped), as
    absolute paths: a file's path is its external id, so ingesting it again updates it."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(
                file
                for file in sorted(path.rglob("*"))
                if file.is_file()
                and not any(
                    part.startswith(".") or part in SKIPPED_NAMES
                    for part in file.relative_to(path).parts
                )
            )
        else:
            found.append(path)
    return [file.resolve() for file in found]


async def ingest_files(
    services: Services, files: list[Path], *, tenant_id: str, collection: str, console: Console
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
    batch: list[tuple[Path, DocumentInput]] = []
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("ingesting", total=len(files))

        async def flush() -> None:
            await _ingest_batch(services, batch, tenant_id=tenant_id, summary=summary)
            progress.advance(task, len(batch))
            batch.clear()

        for file in files:
            progress.update(task, description=file.name[:40])
            try:
                batch.append((file, await _read(services, file, collection=collection)))
            except AppError as error:
                summary.failed[str(file)] = error.detail
                progress.advance(task)
            except OSError as error:
                summary.failed[str(file)] = error.strerror or str(error)
                progress.advance(task)
            if len(batch) >= BATCH_FILES or _size(batch) >= BATCH_BYTES:
                await flush()
        if batch:
            await flush()
    return summary


def _size(batch: list[tuple[Path, DocumentInput]]) -> int:
    return sum(len(document.content) for _, document in batch)


async def _read(services: Services, file: Path, *, collection: str) -> DocumentInput:
    limit = services.settings.upload_max_bytes
    path = anyio.Path(file)
    if (await path.stat()).st_size > limit:
        raise PayloadTooLarge(f"larger than {limit} bytes (RAG_UPLOAD_MAX_BYTES)")
    data = await path.read_bytes()
    if not data:
        raise Unprocessable("the file is empty")
    return DocumentInput(
        content=data,
        source_type=sniff_source_type(data, filename=file.name, declared=None),
        external_id=str(file),
        collection=collection,
        source_url=file.as_uri(),
        metadata={"filename": file.name},
    )


async def _ingest_batch(
    services: Services,
    batch: list[tuple[Path, DocumentInput]],
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
    )
    for (file, _), outcome in zip(batch, outcomes, strict=True):
        if isinstance(outcome, AppError):
            summary.failed[str(file)] = outcome.detail
        else:
            summary.chunks += outcome.chunks
            summary.embedded += outcome.embedded
            summary.unchanged += outcome.unchanged


def summary_table(summary: Summary) -> Table:
    table = Table(title="ingest summary")
    for name in ("files", "chunks", "embedded", "unchanged", "failed"):
        table.add_column(name, justify="right")
    table.add_row(
        *(
            str(v)
            for v in (
                summary.files,
                summary.chunks,
                summary.embedded,
                summary.unchanged,
                len(summary.failed),
            )
        )
    )
    return table


def failure_lines(summary: Summary) -> list[str]:
    """One line per failed file, whole (a table would fold long paths)."""
    return [f"failed: {file}: {reason}" for file, reason in summary.failed.items()]
