"""Ingestion jobs: inputs stored as tenant rows, run in turns by queue workers (procrastinate),
each turn a run of the ingestion pipeline (docs/JOBS.md)."""

from app.jobs.store import (
    JobInput,
    JobLimits,
    JobView,
    cancel_job,
    get_job,
    list_jobs,
    submit_job,
)

__all__ = [
    "JobInput",
    "JobLimits",
    "JobView",
    "cancel_job",
    "get_job",
    "list_jobs",
    "submit_job",
]
