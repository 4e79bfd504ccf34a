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
