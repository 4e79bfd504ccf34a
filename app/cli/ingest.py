"""`rag ingest PATH… --tenant T` in this process: a progress bar, files read one after the
other straight into the ingest operation (app/operations/ingest.py), as the service counts it."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator

import anyio
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from app.cli.files import SourceFile, content_version
from app.cli.views import Summary
from app.errors import AppError
from app.ingest.inputs import DocumentInput
from app.ingest.steps import Outcome
from app.inputs.files import check_size, file_input, not_empty
from app.operations import ingest as ingest_operations
from app.resources import Resources


async def ingest_files(
    services: Resources,
    files: list[SourceFile],
    *,
    tenant_id: str,
    collection: str,
    access: tuple[str, ...] = (),
    console: Console,
) -> Summary:
    """Files are read while the ones before them are parsed, embedded and written (each file
    still all-or-nothing); a file that cannot be read fails alone."""
    summary = Summary(files=len(files))
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
    )
    sent: deque[SourceFile] = deque()  # files in the pipeline: outcomes come in this order
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("ingesting", total=len(files))

        async def documents() -> AsyncIterator[DocumentInput]:
            for file in files:
                try:
                    document = await _read(services, file, collection=collection, access=access)
                except AppError as error:
                    summary.failed[file.external_id] = error.detail
                    progress.advance(task)
                    continue
                except OSError as error:
                    summary.failed[file.external_id] = error.strerror or str(error)
                    progress.advance(task)
                    continue
                sent.append(file)
                yield document

        async def record(_index: int, outcome: Outcome) -> None:
            file = sent.popleft()
            progress.update(task, description=file.external_id[-40:])
            _add(summary, file, outcome)
            progress.advance(task)

        await ingest_operations.stream(services, services.sessions, tenant_id, documents(), record)
    return summary


async def _read(
    services: Resources, file: SourceFile, *, collection: str, access: tuple[str, ...]
) -> DocumentInput:
    path = anyio.Path(file.path)
    check_size((await path.stat()).st_size, services.settings.upload_max_bytes)
    data = not_empty(await path.read_bytes())
    return file_input(
        data,
        filename=file.path.name,
        external_id=file.external_id,
        collection=collection,
        metadata={"filename": file.path.name},
        access=access,
        version=content_version(data),
    )


def _add(summary: Summary, file: SourceFile, outcome: Outcome) -> None:
    if isinstance(outcome, AppError):
        summary.failed[file.external_id] = outcome.detail
    else:
        summary.chunks += outcome.chunks
        summary.embedded += outcome.embedded
        summary.unchanged += outcome.unchanged
