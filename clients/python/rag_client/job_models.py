"""Ingestion jobs: what POST /api/rag/jobs accepts and GET /api/rag/jobs/{id} reports."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum

from pydantic import Field, JsonValue

from rag_client.models import Reply


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    PARTIAL = "partial"

    @property
    def final(self) -> bool:
        return self not in (JobStatus.QUEUED, JobStatus.RUNNING)


class JobAccepted(Reply):
    job_id: uuid.UUID
    status: JobStatus
    documents: int
    bytes: int


class Progress(Reply):
    documents_total: int
    documents_done: int
    documents_failed: int
    chunks_done: int
    chunks_in_progress: int
    chunks_in_progress_total: int
    bytes_total: int
    bytes_pending: int


class JobTimings(Reply):
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    queued_seconds: float | None
    run_seconds: float | None


class CallbackStatus(StrEnum):
    """`waiting` for the job's end, `pending` until a receiver accepts, `delivered`, or
    `failed` once the retry window has passed."""

    WAITING = "waiting"
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


class JobCallback(Reply):
    """Where the job's end is POSTed (signed), and how that stands."""

    url: str
    status: CallbackStatus
    attempts: int
    last_error: str | None
    next_attempt_at: datetime | None = None
    delivered_at: datetime | None = None


class SyncJobAccepted(JobAccepted):
    """A collection sync accepted as a background job."""

    references: int
    location: str


class JobSync(Reply):
    """The collection sync a job runs: its outcome (external ids under `added`, `updated`,
    `unchanged`, `deleted`, `missing`, and `failed` entries) and receipt once it has ended."""

    collection: str
    outcome: dict[str, JsonValue] | None = None
    receipt_id: uuid.UUID | None = None


class Job(Reply):
    job_id: uuid.UUID
    status: JobStatus
    cancel_requested: bool
    progress: Progress
    results: list[dict[str, JsonValue]]
    error: str | None
    turns: int
    timings: JobTimings
    callback: JobCallback | None = None
    sync: JobSync | None = None
    files: list[str] = Field(default_factory=list)  # its documents' names, the first 20
    collections: list[str] = Field(default_factory=list)  # the collections it writes to


class JobPage(Reply):
    items: list[Job]
    total: int
    limit: int
    offset: int
