"""Near-duplicate pairs and groups as pure functions of vectors (dedupe.py does the database
work): every pair at or above a cosine threshold by exact comparison, the connected components
of pairs (union-find), and which document of a group is kept.

Versions: a document's `version` is the source's own, opaque string (an etag, a commit, a
time). `keep_latest_version` compares them only when every copy of the group carries one and
all read as numbers, or all as ISO 8601 times (a time without a zone is taken as UTC);
otherwise it keeps the last ingested, as `keep_newest` does, and `versions_compared` is None
with a note saying why."""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from app.inputs.vocabulary import MergeStrategy as MergeStrategy
from app.retrieval.differences import Difference

EXACT_BLOCK = 1_024  # rows of the exact comparison per matrix product


@dataclass(frozen=True, slots=True)
class Examined:
    """A document as it was examined: the evidence a merge re-checks."""

    id: uuid.UUID
    title: str
    collection: str
    external_id: str
    created_at: datetime
    updated_at: datetime
    returned_count: int  # how often search, context and similar returned it
    access: tuple[str, ...] = ()
    version: str | None = None  # the source's revision, as given


@dataclass(frozen=True, slots=True)
class Versions:
    """How a group's versions compare: `kind` "number" or "iso_time" and each copy's key, or
    `kind` None and `reason` (then keep_latest_version keeps the last ingested)."""

    kind: str | None
    keys: dict[uuid.UUID, float]
    reason: str = ""


@dataclass(frozen=True, slots=True)
class DuplicateGroup:
    primary: Examined
    duplicates: list[Examined]
    avg_similarity: float
    differences: tuple[Difference, ...] = ()  # each duplicate against the primary

    @property
    def members(self) -> list[Examined]:
        return [self.primary, *self.duplicates]


def exact_pairs(
    ids: Sequence[uuid.UUID], vectors: np.ndarray, threshold: float
) -> dict[tuple[uuid.UUID, uuid.UUID], float]:
    """Every pair at or above `threshold` by cosine similarity (vectors need not be unit).
    Row blocks keep memory at `EXACT_BLOCK` by N similarities whatever N is."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = vectors / np.where(norms == 0, 1, norms)
    pairs: dict[tuple[uuid.UUID, uuid.UUID], float] = {}
    for start in range(0, len(unit), EXACT_BLOCK):
        sims = unit[start : start + EXACT_BLOCK] @ unit.T
        rows, cols = np.nonzero(sims >= threshold)
        for i, j in zip(rows.tolist(), cols.tolist(), strict=True):
            if j > start + i:  # each unordered pair once, never a document with itself
                pairs[pair_key(ids[start + i], ids[j])] = float(sims[i, j])
    return pairs


def pair_key(a: uuid.UUID, b: uuid.UUID) -> tuple[uuid.UUID, uuid.UUID]:
    return (a, b) if str(a) < str(b) else (b, a)


def components(
    pairs: dict[tuple[uuid.UUID, uuid.UUID], float],
) -> list[tuple[list[uuid.UUID], list[float]]]:
    """Connected components (union-find): (members, similarities of their pairs)."""
    parent: dict[uuid.UUID, uuid.UUID] = {}

    def root(x: uuid.UUID) -> uuid.UUID:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb, key=str)] = min(ra, rb, key=str)
    members: dict[uuid.UUID, list[uuid.UUID]] = {}
    for x in parent:
        members.setdefault(root(x), []).append(x)
    edges: dict[uuid.UUID, list[float]] = {}
    for (a, _b), similarity in pairs.items():
        edges.setdefault(root(a), []).append(similarity)
    return [(sorted(group, key=str), edges[r]) for r, group in members.items()]


def versions(docs: Sequence[Examined]) -> Versions:
    """Whether the copies' versions compare, and how (see the module's docstring)."""
    missing = next((d for d in docs if not d.version), None)
    if missing is not None:
        return Versions(None, {}, f"{_named(missing)} carries no version")
    numbers = {d.id: _number(str(d.version)) for d in docs}
    if all(n is not None for n in numbers.values()):
        return Versions("number", {i: n for i, n in numbers.items() if n is not None})
    times = {d.id: _time(str(d.version)) for d in docs}
    if all(t is not None for t in times.values()):
        return Versions("iso_time", {i: t for i, t in times.items() if t is not None})
    odd = next((d for d in docs if numbers[d.id] is None and times[d.id] is None), None)
    if odd is None:
        return Versions(None, {}, "the versions mix numbers and ISO 8601 times")
    given = str(odd.version)
    shown = given if len(given) <= 24 else f"{given[:23]}…"  # a content hash says enough so
    return Versions(
        None, {}, f"{_named(odd)} has version {shown!r}, neither an ISO 8601 time nor a number"
    )


def _named(doc: Examined) -> str:
    return f"{doc.collection}/{doc.external_id}"


def _number(value: str) -> float | None:
    try:
        number = float(value)
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def _time(value: str) -> float | None:
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def primary_of(docs: Sequence[Examined], strategy: MergeStrategy) -> Examined:
    """The document a group keeps; ties by id, so the choice is stable."""
    if strategy is MergeStrategy.KEEP_LATEST_VERSION:
        compared = versions(docs)
        if compared.kind is not None:
            return max(docs, key=lambda d: (compared.keys[d.id], d.updated_at, str(d.id)))
    if strategy is MergeStrategy.KEEP_OLDEST:
        return min(docs, key=lambda d: (d.created_at, str(d.id)))
    if strategy is MergeStrategy.KEEP_MOST_RETURNED:
        return max(docs, key=lambda d: (d.returned_count, d.updated_at, str(d.id)))
    return max(docs, key=lambda d: (d.updated_at, d.created_at, str(d.id)))


def group_of(docs: list[Examined], edges: list[float], strategy: MergeStrategy) -> DuplicateGroup:
    primary = primary_of(docs, strategy)
    duplicates = sorted((d for d in docs if d.id != primary.id), key=lambda d: str(d.id))
    return DuplicateGroup(
        primary=primary,
        duplicates=duplicates,
        avg_similarity=round(sum(edges) / len(edges), 6),
    )
