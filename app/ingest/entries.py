"""What a collection sync names besides full documents (app/ingest/sync.py): a reference to a
document the caller's source still has. Standard library only: the door-neutral inputs
(app/inputs/sync.py) import it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Reference:
    """A document the caller's source still has, named by its id and revision only."""

    external_id: str
    version: str


@dataclass(frozen=True, slots=True)
class Ingested:
    """A full entry of a sync run as a job, once the job has tried it: at the job's end it is
    named (kept) under its access list, like the full document it was; `access` None when its
    ingest failed (every stored copy of it stays as it was)."""

    external_id: str
    access: tuple[str, ...] | None
