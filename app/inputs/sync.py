"""A collection sync as every door asks for it (POST /api/rag/collections/{name}/sync,
`rag sync`, the client's `sync()`): the collection's complete content as the source sees it,
each entry a full document or a reference, and the guards. Checked here once, so every door
refuses the same input with the same words (a 422 naming the entry, nothing changed)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from app.errors import Unprocessable
from app.ingest.entries import Reference
from app.ingest.sync import check_deletions

MAX_ENTRIES = 100_000  # a sync's entries; past the request size limit, send them as a job


class Named(Protocol):
    """An entry: a `Reference`, or a full document (app/ingest/inputs.py: DocumentInput)."""

    @property
    def external_id(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class SyncInput:
    collection: str
    entries: Sequence[Named]
    dry_run: bool = False
    allow_empty: bool = False  # an empty list deletes every visible document: said explicitly
    # at most this many deletions (an int), or this fraction of the visible documents (a float
    # in (0, 1)); more refuses the sync with a 409 and changes nothing
    max_deletions: int | float | None = None

    def __post_init__(self) -> None:
        if not self.entries and not self.allow_empty:
            raise Unprocessable(
                "documents is empty: that deletes every document of the collection; "
                'say so with "allow_empty": true (rag sync: --allow-empty)'
            )
        if len(self.entries) > MAX_ENTRIES:
            raise Unprocessable(f"a sync names at most {MAX_ENTRIES} documents")
        seen: dict[str, int] = {}
        for index, entry in enumerate(self.entries):
            if not entry.external_id:
                raise Unprocessable(f"documents[{index}]: a synced document needs an external_id")
            if isinstance(entry, Reference) and not entry.version:
                raise Unprocessable(f"documents[{index}]: a reference needs a version")
            if (first := seen.setdefault(entry.external_id, index)) != index:
                raise Unprocessable(
                    f"documents[{index}]: external_id {entry.external_id!r} is also "
                    f"documents[{first}]"
                )
        limit = self.max_deletions
        if isinstance(limit, float) and not 0 < limit < 1:
            raise Unprocessable("max_deletions: a fraction is between 0 and 1 (exclusive)")
        if isinstance(limit, int) and limit < 0:
            raise Unprocessable("max_deletions: a count is 0 or more")

    def check_deletions(self, deleting: int, visible: int) -> None:
        """409 when the sync would delete more than `max_deletions` allows."""
        check_deletions(self.max_deletions, deleting, visible)
