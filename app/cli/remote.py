"""The data commands against a running service, through the Python client (clients/python):
no database, no model, nothing heavier than httpx and pydantic in this process."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from rag_client import (
    Forbidden,
    ProblemError,
    RagClient,
    RagError,
    Retry,
    Unauthorized,
)
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from app.cli.files import SourceFile
from app.cli.options import Remote, fail
from app.cli.views import Summary

RETRY = Retry(attempts=4, max_wait=60)  # 429/503: wait as the service asks, a few times
TOKEN_HINT = "pass --token or set RAG_TOKEN (`rag token --tenant T` on the server prints one)"


@contextmanager
def connect(target: Remote) -> Iterator[RagClient]:
    """A client for `target`; any error the service replies becomes one line and exit 2."""
    try:
        with RagClient(target.url, target.token, tenant=target.tenant, retries=RETRY) as rag:
            yield rag
    except Unauthorized as error:
        fail(f"{error.detail}; {TOKEN_HINT}" if not target.token else error.detail)
    except ProblemError as error:
        fail(error.detail)
    except RagError as error:
        fail(f"{error} ({target.url})")


def ingest(
    target: Remote, files: list[SourceFile], *, collection: str | None, console: Console
) -> Summary:
    """Upload each file (its type is sniffed by the service); a file that fails is listed in
    the summary, and the others still go. A refused token stops it all."""
    summary = Summary(files=len(files))
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TextColumn("{task.fields[done]}/{task.fields[files]} files"),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
    )
    total = sum(file.size for file in files)
    with (
        connect(target) as rag,
        Progress(*columns, console=console, transient=True) as progress,
    ):
        task = progress.add_task("sending", total=total, done=0, files=len(files))
        for done, file in enumerate(files, start=1):
            progress.update(task, description=file.external_id[-40:])
            _send(rag, file, collection=collection, summary=summary)
            progress.update(task, advance=file.size, done=done)
    return summary


def _send(rag: RagClient, file: SourceFile, *, collection: str | None, summary: Summary) -> None:
    try:
        result = rag.upload(
            file.path,
            external_id=file.external_id,
            collection=collection,
            metadata={"filename": file.path.name},
        )
    except (Unauthorized, Forbidden):
        raise
    except ProblemError as error:
        summary.failed[file.external_id] = error.detail
    except OSError as error:
        summary.failed[file.external_id] = error.strerror or str(error)
    else:
        summary.chunks += result.chunks
        summary.embedded += result.embedded
        summary.unchanged += result.unchanged
