"""Request and response models of the jobs endpoints."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, Field, JsonValue

from app.api.documents_models import DocumentIn, StrictBody
from app.jobs import JobView

JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled", "partial"]


class JobDocumentsIn(StrictBody):
    documents: Annotated[list[DocumentIn], Field(min_length=1)]
    callback_url: str | None = Field(
        default=None,
        description="Called (a POST signed as Standard Webhooks say) when the job ends: "
        "https, or a host the service's operator allowed (docs/JOBS.md).",
    )


class JobAccepted(BaseModel):
    job_id: uuid.UUID
    status: JobStatus
    documents: int
    bytes: int


class Progress(BaseModel):
    documents_total: int
    documents_done: int = Field(description="Documents ingested.")
    documents_failed: int
    chunks_done: int = Field(description="Chunks of the finished documents.")
    chunks_in_progress: int = Field(description="Chunks embedded of the document in progress.")
    chunks_in_progress_total: int
    bytes_total: int
    bytes_pending: int


class JobTimings(BaseModel):
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    queued_seconds: float | None
    run_seconds: float | None


class Callback(BaseModel):
    url: str
    status: Literal["waiting", "pending", "delivered", "failed"] = Field(
        description="`waiting` for the job's end, `pending` until a receiver accepts (2xx), "
        "`delivered`, or `failed` once the retry window has passed."
    )
    attempts: int
    last_error: str | None
    next_attempt_at: datetime | None
    delivered_at: datetime | None

    @classmethod
    def of(cls, job: JobView) -> Self | None:
        if job.callback_url is None or job.callback_status is None:
            return None
        return cls(
            url=job.callback_url,
            status=job.callback_status,
            attempts=job.callback_attempts,
            last_error=job.callback_last_error,
            next_attempt_at=job.callback_next_at,
            delivered_at=job.callback_delivered_at,
        )


class JobSync(BaseModel):
    """A collection sync run as this job (docs/SYNC.md, "Large syncs")."""

    collection: str
    outcome: dict[str, JsonValue] | None = Field(
        description="Once the job has ended: `added`, `updated`, `unchanged`, `deleted` and "
        "`missing` external ids, and `failed` entries (as a sync's reply lists them); null "
        "while it runs, and for a cancelled job (which deletes nothing)."
    )
    receipt_id: uuid.UUID | None = Field(
        description="The sync's signed receipt (GET /api/rag/receipts/{receipt_id})."
    )

    @classmethod
    def of(cls, job: JobView) -> Self | None:
        if job.sync is None:
            return None
        return cls(
            collection=job.sync["collection"],
            outcome=job.sync.get("outcome"),
            receipt_id=job.receipt_id,
        )


class JobOut(BaseModel):
    job_id: uuid.UUID
    status: JobStatus
    cancel_requested: bool
    progress: Progress
    results: list[dict[str, JsonValue]] = Field(
        description="One per finished document: `status`, `document_id`, `chunks`, or `error`."
    )
    error: str | None
    turns: int
    timings: JobTimings
    callback: Callback | None = Field(description="The job's callback, when it has one.")
    sync: JobSync | None = Field(None, description="When the job is a collection sync.")
    files: list[str] = Field(
        description="Its documents' names (file names, or external ids), the first 20 in "
        "submission order; `progress.documents_total` counts them all."
    )
    collections: list[str] = Field(description="The collections it writes to.")

    @classmethod
    def of(cls, job: JobView) -> Self:
        end = job.finished_at or job.updated_at
        return cls(
            job_id=job.id,
            status=job.status,
            cancel_requested=job.cancel_requested,
            progress=Progress(
                documents_total=job.documents_total,
                documents_done=job.documents_done,
                documents_failed=job.documents_failed,
                chunks_done=job.chunks_done,
                chunks_in_progress=job.chunks_in_progress,
                chunks_in_progress_total=job.chunks_in_progress_total,
                bytes_total=job.bytes_total,
                bytes_pending=job.bytes_pending,
            ),
            results=_results(job.results),
            files=job.files,
            collections=job.collections,
            error=job.error,
            turns=job.turns,
            timings=JobTimings(
                created_at=job.created_at,
                started_at=job.started_at,
                finished_at=job.finished_at,
                updated_at=job.updated_at,
                queued_seconds=_seconds(job.created_at, job.started_at),
                run_seconds=_seconds(job.started_at, end if job.started_at else None),
            ),
            callback=Callback.of(job),
            sync=JobSync.of(job),
        )


def _results(results: list[dict[str, Any]]) -> list[dict[str, JsonValue]]:
    return sorted(results, key=lambda item: int(item.get("position", 0)))


def _seconds(start: datetime | None, end: datetime | None) -> float | None:
    return None if start is None or end is None else round((end - start).total_seconds(), 3)


class JobList(BaseModel):
    items: list[JobOut]
    total: int
    limit: int
    offset: int
