"""The data commands against a running service, through the Python client (clients/python):
no database and no model in this process (`rag ingest` reads files with the service's parsers
to batch them, app/cli/sending.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

import rag_client
from rag_client import (
    AsyncRagClient,
    DocumentReference,
    Forbidden,
    Job,
    PayloadTooLarge,
    ProblemError,
    RagClient,
    RagError,
    Retry,
    SyncResult,
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

from app.cli.files import SourceFile, content_version
from app.cli.options import Remote, fail
from app.cli.sending import Outgoing, outgoing, requests
from app.cli.views import Summary
from app.ingest.entries import Reference

if TYPE_CHECKING:
    from pydantic import BaseModel

    from app.cli.backend import TextDocument
    from app.inputs.search import ContextInput, SearchInput
    from app.inputs.similar import DedupeInput, SimilarInput

T = TypeVar("T")

RETRY = Retry(attempts=4, max_wait=60)  # 429/503: wait as the service asks, a few times
TOKEN_HINT = "pass --token or set RAG_TOKEN (`rag token --tenant T` on the server prints one)"


def _retry(console: Console | None) -> Retry:
    """Each wait on a 429 or 503 said on `console` (stderr by default)."""
    said = console or Console(stderr=True)

    def announce(error: ProblemError, seconds: float) -> None:
        why = "the tenant's rate limit" if error.status == 429 else "the service is unavailable"
        line = f"{why} ({error.status}: {error.detail}): waiting {seconds:g} s before trying again"
        said.print(line, markup=False, highlight=False)

    return replace(RETRY, on_wait=announce)


@contextmanager
def _refusals(target: Remote) -> Iterator[None]:
    """Any error the service replies becomes one line and exit 2."""
    try:
        yield
    except Unauthorized as error:
        fail(f"{error.detail}; {TOKEN_HINT}" if not target.token else error.detail)
    except ProblemError as error:
        fail(error.detail)
    except RagError as error:
        fail(f"{error} ({target.url})")


@contextmanager
def connect(target: Remote, *, console: Console | None = None) -> Iterator[RagClient]:
    """A client for `target`; any error the service replies becomes one line and exit 2.
    Each wait on a 429 or 503 is said on `console` (stderr by default)."""
    retry = _retry(console)
    with (
        _refusals(target),
        RagClient(target.url, target.token, tenant=target.tenant, retries=retry) as rag,
    ):
        yield rag


@dataclass(frozen=True, slots=True)
class OverHttp:
    """The data commands' questions asked of a running service (app/cli/backend.py): the
    input's fields given, and only those, are sent; the service applies its defaults."""

    rag: AsyncRagClient

    async def search(self, asked: SearchInput) -> rag_client.SearchResult:
        return await self.rag.search(asked.query, **_sent(asked, "query"))

    async def context(self, asked: ContextInput) -> rag_client.ContextResult:
        return await self.rag.context(asked.query, **_sent(asked, "query"))

    async def similar(
        self, item_id: uuid.UUID, asked: SimilarInput, *, chunk: bool
    ) -> rag_client.SimilarResult:
        ask = self.rag.similar_to_chunk if chunk else self.rag.similar_to_document
        return await ask(
            item_id,
            top_k=asked.top_k,
            min_similarity=asked.min_similarity,
            search_scope=asked.scope.value,
            exclude_same_document=asked.exclude_same_document if chunk else None,
            collections=asked.collections,
        )

    async def dedupe(self, asked: DedupeInput) -> rag_client.DedupeResult:
        return await self.rag.dedupe(**_sent(asked))

    async def ingest_texts(self, documents: Sequence[TextDocument]) -> list[str]:
        reply = await self.rag.ingest_batch(
            [
                rag_client.NewDocument(
                    content=d.content,
                    title=d.title,
                    external_id=d.external_id,
                    collection=d.collection,
                    source_type=rag_client.SourceType.TEXT,
                )
                for d in documents
            ]
        )
        return [
            f"{documents[item.index].external_id}: {item.error or item.status}"
            for item in reply.results
            if item.result is None
        ]


def _sent(asked: BaseModel, *left_out: str) -> dict[str, Any]:
    fields: dict[str, Any] = asked.model_dump(
        mode="json", by_alias=True, exclude_unset=True, exclude=set(left_out)
    )
    return fields


def run(target: Remote, work: Callable[[OverHttp], Awaitable[T]]) -> T:
    """`work` against the service `target` names (app/cli/backend.py)."""

    async def opened() -> T:
        retry = _retry(None)
        async with AsyncRagClient(
            target.url, target.token, tenant=target.tenant, retries=retry
        ) as rag:
            return await work(OverHttp(rag))

    with _refusals(target):
        return asyncio.run(opened())


def ingest(
    target: Remote,
    files: list[SourceFile],
    *,
    collection: str | None,
    access: Sequence[str] = (),
    console: Console,
) -> Summary:
    """Send the files, text files in batches and the others one upload each (app/cli/
    sending.py); a file that fails is listed in the summary, and the others still go. A
    refused token stops it all."""
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
        connect(target, console=console) as rag,
        Progress(*columns, console=console, transient=True) as progress,
    ):
        task = progress.add_task("sending", total=total, done=0, files=len(files))
        done = 0
        for group in requests(_outgoing(files, collection, access, summary)):
            progress.update(task, description=group[-1].file.external_id[-40:])
            if group[0].document is None:
                _send(rag, group[0].file, collection=collection, access=access, summary=summary)
            else:
                _send_batch(rag, group, collection=collection, access=access, summary=summary)
            done += len(group)
            progress.update(task, advance=sum(o.file.size for o in group), done=done)
    return summary


def _outgoing(
    files: list[SourceFile], collection: str | None, access: Sequence[str], summary: Summary
) -> Iterator[Outgoing]:
    for file in files:
        try:
            yield outgoing(file, collection=collection, access=access)
        except OSError as error:
            summary.failed[file.external_id] = error.strerror or str(error)


def _send_batch(
    rag: RagClient,
    batch: list[Outgoing],
    *,
    collection: str | None,
    access: Sequence[str],
    summary: Summary,
) -> None:
    """One batch request; refused whole for its size (a service with smaller limits than
    the defaults), its files go one upload each."""
    try:
        reply = rag.ingest_batch([item.document for item in batch if item.document is not None])
    except PayloadTooLarge:
        for item in batch:
            _send(rag, item.file, collection=collection, access=access, summary=summary)
        return
    for answer in reply.results:
        name = batch[answer.index].file.external_id
        if answer.result is None:
            summary.failed[name] = answer.error or f"refused ({answer.status})"
        else:
            summary.chunks += answer.result.chunks
            summary.embedded += answer.result.embedded
            summary.unchanged += answer.result.unchanged


def _send(
    rag: RagClient,
    file: SourceFile,
    *,
    collection: str | None,
    access: Sequence[str],
    summary: Summary,
) -> None:
    try:
        result = rag.upload(
            file.path,
            external_id=file.external_id,
            collection=collection,
            metadata={"filename": file.path.name},
            access=list(access),
            version=content_version(file.path.read_bytes()),
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


# One job holds at most this many files and bytes (well under the service's defaults,
# RAG_JOB_MAX_DOCUMENTS 10,000 and RAG_JOB_MAX_REQUEST_BYTES 256 MiB): a large folder is
# several jobs, submitted one after the other and watched together.
JOB_FILES = 500
JOB_BYTES = 64 * 1024 * 1024


def ingest_background(
    target: Remote,
    files: list[SourceFile],
    *,
    collection: str | None,
    access: Sequence[str] = (),
    callback_url: str | None = None,
    console: Console,
) -> Summary:
    """Submit the files as ingestion jobs (each calling back `callback_url` when it ends),
    then show the service's progress until they end; the summary is the jobs' per-document
    results."""
    summary = Summary(files=len(files))
    with connect(target) as rag:
        job_ids = [
            rag.submit(
                [(file.external_id, file.path.read_bytes()) for file in batch],
                collection=collection,
                access=list(access),
                callback_url=callback_url,
            ).job_id
            for batch in _batches(files)
        ]
        jobs = "1 job" if len(job_ids) == 1 else f"{len(job_ids)} jobs"
        files_ = "1 file" if len(files) == 1 else f"{len(files)} files"
        console.print(f"submitted {files_} as {jobs}: {_ids(job_ids)}")
        if callback_url:
            console.print(f"each job calls back {callback_url} when it ends")
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:.0f}/{task.total:.0f} documents"),
            TextColumn("{task.fields[chunks]} chunks"),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=console, transient=True) as progress:
            task = progress.add_task("ingesting", total=len(files), chunks=0)
            seen: dict[str, Job] = {}  # each job as last read; `wait` shows the final one too

            def show(job: Job) -> None:
                seen[str(job.job_id)] = job
                done = sum(
                    j.progress.documents_done + j.progress.documents_failed for j in seen.values()
                )
                chunks = sum(j.progress.chunks_done for j in seen.values())
                progress.update(task, completed=done, chunks=chunks)

            for job_id in job_ids:
                rag.wait(job_id, progress=show, poll_seconds=1.0)
    for job in seen.values():
        _tally(job, summary)
    return summary


def _batches(files: list[SourceFile]) -> Iterator[list[SourceFile]]:
    batch: list[SourceFile] = []
    size = 0
    for file in files:
        if batch and (len(batch) >= JOB_FILES or size + file.size > JOB_BYTES):
            yield batch
            batch, size = [], 0
        batch.append(file)
        size += file.size
    if batch:
        yield batch


def _ids(job_ids: Sequence[object]) -> str:
    return ", ".join(str(job_id) for job_id in job_ids)


def _tally(job: Job, summary: Summary) -> None:
    for result in job.results:
        name = str(result.get("name") or result.get("external_id") or "?")
        if result.get("status") == "succeeded":
            summary.chunks += _count(result.get("chunks"))
            summary.embedded += _count(result.get("embedded"))
            summary.unchanged += _count(result.get("unchanged"))
        else:
            summary.failed[name] = str(result.get("error") or job.error or result.get("status"))
    if job.status == "cancelled":
        summary.failed.setdefault("(job)", f"job {job.job_id} was cancelled")


def _count(value: object) -> int:
    return value if isinstance(value, int) else 0


def sync(
    target: Remote,
    collection: str,
    references: Sequence[Reference],
    *,
    dry_run: bool,
    allow_empty: bool,
    max_deletions: int | float | None,
) -> SyncResult:
    """A sync by references through the service (`rag sync --url`)."""
    documents = [
        DocumentReference(external_id=r.external_id, version=r.version) for r in references
    ]
    with connect(target) as rag:
        return rag.sync(
            collection,
            documents,
            dry_run=dry_run,
            allow_empty=allow_empty,
            max_deletions=max_deletions,
        )
