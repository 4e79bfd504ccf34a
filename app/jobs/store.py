"""Job rows: submit (with its inputs and its first queue entry, in one transaction), read,
list, cancel. Every statement runs in a tenant transaction: RLS hides other tenants' jobs."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from app.db.tenancy import tenant_of
from app.errors import NotFound, PayloadTooLarge, RateLimited
from app.ingest.inputs import DocumentInput
from app.jobs.callbacks import announce_end
from app.permissions import Readers

QUEUE = "ingest"
TASK = "rag.ingest_turn"
ACTIVE = ("queued", "running")
FINAL = ("succeeded", "failed", "cancelled", "partial")


@dataclass(frozen=True, slots=True)
class JobInput:
    """One document waiting in a job: its bytes (or text) and the per-document fields."""

    content: bytes
    is_text: bool
    source_type: str
    name: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)


def input_of(document: DocumentInput) -> JobInput:
    """A document given whole (JSON text, not a file) as a job's input."""
    content = document.content
    fields = {
        "title": document.title,
        "external_id": document.external_id,
        "collection": document.collection,
        "source_url": document.source_url,
        "metadata": dict(document.metadata),
        "access": list(document.access),
        "version": document.version,
    }
    if isinstance(content, str):
        return JobInput(content.encode(), True, document.source_type.value, document.title, fields)
    return JobInput(content, False, document.source_type.value, document.title, fields)


@dataclass(frozen=True, slots=True)
class JobLimits:
    max_queued_jobs: int
    max_queued_bytes: int


@dataclass(frozen=True, slots=True)
class JobView:
    id: uuid.UUID
    tenant_id: str
    status: str
    cancel_requested: bool
    documents_total: int
    documents_done: int
    documents_failed: int
    chunks_done: int
    chunks_in_progress: int
    chunks_in_progress_total: int
    bytes_total: int
    bytes_pending: int
    results: list[dict[str, Any]]
    error: str | None
    turns: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    callback_url: str | None
    callback_status: str | None
    callback_attempts: int
    callback_last_error: str | None
    callback_next_at: datetime | None
    callback_delivered_at: datetime | None
    sync: dict[str, Any] | None  # a sync job's collection and outcome (without its request)
    receipt_id: uuid.UUID | None  # a sync job's receipt, once it has ended
    files: list[str]  # the first FILES_SHOWN names, in submission order (`_WHAT`)
    collections: list[str]  # the collections it writes to


FILES_SHOWN = 20
# What a job is about, for a list of jobs: its documents' names and collections, from the
# results of those done (`results`) and the inputs still waiting (an input goes once its
# result is in), merged by position in `_view`. Two plain subqueries: Citus pushes down
# neither a union with a table function nor one over its results.
# the tenant named as a value (every query of a job view has `:tenant`): on Citus each
# subquery is then routed to the tenant's shard with the rest of the statement
_INPUTS = "from ingest_job_inputs i where i.tenant_id = :tenant and i.job_id = ingest_jobs.id"
_WAITING = (
    f"array(select i.position {_INPUTS} order by i.position limit {FILES_SHOWN}),"
    f" array(select i.name {_INPUTS} order by i.position limit {FILES_SHOWN}),"
    f" array(select distinct i.fields->>'collection' {_INPUTS})"
)
# a sync job's request (every name it holds: up to 100,000) stays out of the views
_COLUMNS = ", ".join(
    [
        *(
            "sync - 'request' as sync" if name == "sync" else name
            for name in JobView.__slots__[:-2]
        ),
        _WAITING,
    ]
)


_RESULTS = JobView.__slots__.index("results")


def _view(row: Any) -> JobView:
    """A job row with its waiting inputs' positions, names and collections: the view."""
    *columns, positions, names, collections = row
    results: list[dict[str, Any]] = columns[_RESULTS]
    named = [(int(r["position"]), r.get("name")) for r in results]
    named += list(zip(positions or (), names or (), strict=True))
    files = [name for _, name in sorted(named, key=lambda pair: pair[0]) if name][:FILES_SHOWN]
    found = {r.get("collection") for r in results} | set(collections or ())
    return JobView(*[*columns, files, sorted(c for c in found if c)])


# Jobs are the tenant's (queue limits count them all), but a job's results name the documents
# it wrote: a caller sees the jobs it submitted (`submitter` among its principals), or every
# job with the all-documents flag. Read from the transaction's settings (app/db/tenancy.py).
_VISIBLE = (
    "(submitter is null or (select rag_all_documents())"
    " or array[submitter] && (select rag_principals()))"
)


async def submit_job(
    session: AsyncSession,
    *,
    tenant_id: str,
    inputs: Sequence[JobInput],
    limits: JobLimits,
    submitter: str,
    readers: Readers,
    callback_url: str | None = None,
    sync: dict[str, Any] | None = None,
) -> uuid.UUID:
    """Store the job and its inputs and queue its first turn, atomically; 429/413 past the
    tenant's limits on queued jobs and queued bytes. The job's documents are written later as
    `readers` (who submitted it), and only `submitter` (or an all-documents caller) sees it.
    A `callback_url` (checked by `check_callback_url`) is called when the job ends. A `sync`
    (app/jobs/syncing.py) makes it a collection sync, finished when its inputs are done."""
    size = sum(len(item.content) for item in inputs)
    active, pending = (
        await session.execute(
            text(
                "select count(*), coalesce(sum(bytes_pending), 0) from ingest_jobs"
                " where tenant_id = :t and status in ('queued', 'running')"
            ),
            {"t": tenant_id},
        )
    ).one()
    if active >= limits.max_queued_jobs:
        raise RateLimited(
            f"{active} jobs are queued or running; at most {limits.max_queued_jobs} "
            "(RAG_JOB_MAX_QUEUED_JOBS): wait for one to finish",
            headers={"Retry-After": "30"},
        )
    if pending + size > limits.max_queued_bytes:
        raise PayloadTooLarge(
            f"{pending} bytes are already queued and this job adds {size}; at most "
            f"{limits.max_queued_bytes} per tenant (RAG_JOB_MAX_QUEUED_BYTES)"
        )
    job_id = uuid.uuid4()
    await session.execute(
        text(
            "insert into ingest_jobs (id, tenant_id, documents_total, bytes_total, bytes_pending,"
            " submitter, readers, callback_url, callback_status, sync) values (:id, :t, :n, :b,"
            " :b, :who, cast(:readers as jsonb), :callback, :callback_status,"
            " cast(:sync as jsonb))"
        ),
        {
            "id": job_id,
            "t": tenant_id,
            "n": len(inputs),
            "b": size,
            "who": submitter,
            "readers": json.dumps(readers.to_json()),
            "callback": callback_url,
            "callback_status": None if callback_url is None else "waiting",
            "sync": None if sync is None else json.dumps(sync),
        },
    )
    if inputs:  # none in a sync of references only
        await session.execute(
            text(
                "insert into ingest_job_inputs (id, tenant_id, job_id, position, name, content,"
                " is_text, source_type, fields, size_bytes) values (:id, :t, :job, :pos, :name,"
                " :content, :is_text, :source_type, cast(:fields as jsonb), :size)"
            ),
            [
                {
                    "id": uuid.uuid4(),
                    "t": tenant_id,
                    "job": job_id,
                    "pos": position,
                    "name": item.name,
                    "content": item.content,
                    "is_text": item.is_text,
                    "source_type": item.source_type,
                    "fields": json.dumps(item.fields),
                    "size": len(item.content),
                }
                for position, item in enumerate(inputs)
            ],
        )
    await queue_turn(session, tenant_id=tenant_id, job_id=job_id, others=active)
    return job_id


async def queue_turn(
    session: AsyncSession, *, tenant_id: str, job_id: uuid.UUID, others: int
) -> None:
    """Queue the job's next turn in the caller's transaction (procrastinate's own defer
    function, so the queue entry commits or rolls back with the job row).

    Fair turns: the priority is minus the number of the tenant's other active jobs, so a
    tenant's first job goes ahead of another tenant's tenth; equal priorities run in queue
    order, and a long job re-queues itself after every turn, behind whoever came meanwhile.
    The lock keeps two turns of one job from ever running at once."""
    args = json.dumps({"job_id": str(job_id), "tenant_id": tenant_id})
    await session.execute(
        text(
            "select procrastinate_defer_jobs_v1(array[row(:queue, :task, :priority, :lock,"
            " null, cast(:args as jsonb), null)::procrastinate_job_to_defer_v1])"
        ),
        {"queue": QUEUE, "task": TASK, "priority": -others, "lock": f"job:{job_id}", "args": args},
    )


async def get_job(session: AsyncSession, job_id: uuid.UUID) -> JobView:
    row = (
        await session.execute(
            text(
                f"select {_COLUMNS} from ingest_jobs"
                f" where tenant_id = :tenant and id = :id and {_VISIBLE}"
            ),
            {"tenant": tenant_of(session), "id": job_id},
        )
    ).one_or_none()
    if row is None:
        raise NotFound(f"no job {job_id}")
    return _view(row)


async def get_job_of(session: AsyncSession, *, tenant_id: str, job_id: uuid.UUID) -> JobView | None:
    """The job as the workers see it (whoever submitted it)."""
    row = (
        await session.execute(
            text(f"select {_COLUMNS} from ingest_jobs where tenant_id = :tenant and id = :id"),
            {"tenant": tenant_id, "id": job_id},
        )
    ).one_or_none()
    return None if row is None else _view(row)


async def list_jobs(
    session: AsyncSession, *, status: str | None, limit: int, offset: int
) -> tuple[list[JobView], int]:
    where = f"where tenant_id = :tenant and {_VISIBLE}" + (
        " and status = :status" if status else ""
    )
    params: dict[str, Any] = {
        "tenant": tenant_of(session),
        "status": status,
        "limit": limit,
        "offset": offset,
    }
    rows = await session.execute(
        text(
            f"select {_COLUMNS} from ingest_jobs {where}"
            " order by created_at desc, id limit :limit offset :offset"
        ),
        params,
    )
    total = await session.scalar(text(f"select count(*) from ingest_jobs {where}"), params)
    return [_view(row) for row in rows], int(total or 0)


async def cancel_job(session: AsyncSession, job_id: uuid.UUID) -> JobView:
    """A queued job is cancelled at once and never runs; a running one stops after the
    document in progress; a finished one is left as it is."""
    await get_job(session, job_id)  # 404 for an unknown id, another tenant's or user's
    key = {"tenant": tenant_of(session), "id": job_id}
    cancelled = await session.execute(
        text(
            "update ingest_jobs set status = 'cancelled', cancel_requested = true,"
            " bytes_pending = 0, finished_at = now(), updated_at = now()"
            " where tenant_id = :tenant and id = :id and status = 'queued' returning id"
        ),
        key,
    )
    if cancelled.one_or_none() is not None:
        await session.execute(
            text("delete from ingest_job_inputs where tenant_id = :tenant and job_id = :id"), key
        )
        await announce_end(session, tenant_id=tenant_of(session), job_id=job_id)
    else:
        await session.execute(
            text(
                "update ingest_jobs set cancel_requested = true, updated_at = now()"
                " where tenant_id = :tenant and id = :id and status = 'running'"
            ),
            key,
        )
    return await get_job(session, job_id)


@dataclass(frozen=True, slots=True)
class JobCounts:
    queued: int
    running: int
    queued_bytes: int


async def job_counts(session: AsyncSession) -> JobCounts:
    """The session tenant's active jobs (RLS scopes the table)."""
    queued, running, pending = (
        await session.execute(
            text(
                "select count(*) filter (where status = 'queued'),"
                " count(*) filter (where status = 'running'), coalesce(sum(bytes_pending), 0)"
                " from ingest_jobs where tenant_id = :tenant and status in ('queued', 'running')"
            ),
            {"tenant": tenant_of(session)},
        )
    ).one()
    return JobCounts(int(queued), int(running), int(pending))
