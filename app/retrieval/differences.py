"""What differs between two copies of a document: the passages a merge would lose, as pure
functions of their texts (dedupe.py reads the texts). Bounded: the first `MAX_COMPARED_CHARS`
of each text, at most `MAX_PASSAGES` passages of at most `MAX_PASSAGE_CHARS` characters a side.

A document's text is its chunks in order, the overlap between consecutive chunks taken out
(`joined`). The comparison is word by word (difflib); a passage is one run of changes with
`CONTEXT_WORDS` unchanged words around it, and names the changed words of each side."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

MAX_COMPARED_CHARS = 100_000
MAX_PASSAGES = 5
MAX_PASSAGE_CHARS = 300
CONTEXT_WORDS = 6
OVERLAP_PROBE = 20  # characters of a chunk's start looked for in the previous chunk's end
MAX_OVERLAP_CHARS = 4_000  # how far back in the previous text an overlap may start


@dataclass(frozen=True, slots=True)
class Passage:
    """One place where the copies differ: each side's text there, and its changed words."""

    primary: str  # as the group's primary has it ("" when only the other copy has text here)
    duplicate: str
    primary_changed: str
    duplicate_changed: str


@dataclass(frozen=True, slots=True)
class Difference:
    """A duplicate compared with its group's primary."""

    document_id: uuid.UUID
    compared_with: uuid.UUID
    identical: bool
    passages: tuple[Passage, ...]
    omitted: int  # further differing passages, not shown
    truncated: bool  # a text was longer than MAX_COMPARED_CHARS: only its start was compared


def joined(chunks: Sequence[str]) -> str:
    """A document's text from its chunks in order, each chunk's overlap with the previous one
    (the chunker repeats the end of a chunk at the start of the next) taken out."""
    text = ""
    for chunk in chunks:
        text = chunk if not text else text + "\n" + chunk[_overlap(text, chunk) :].lstrip()
    return text


def _overlap(before: str, chunk: str) -> int:
    """How many leading characters of `chunk` repeat the end of `before` (0 if none found)."""
    probe = chunk[:OVERLAP_PROBE]
    if len(probe) < OVERLAP_PROBE:
        return 0
    at = before.find(probe, max(0, len(before) - MAX_OVERLAP_CHARS))
    while at >= 0:  # the earliest match is the longest overlap
        if chunk.startswith(before[at:]):
            return len(before) - at
        at = before.find(probe, at + 1)
    return 0


def compare(
    primary_id: uuid.UUID, primary: str, document_id: uuid.UUID, duplicate: str
) -> Difference:
    """The passages where `duplicate` differs from `primary`, in the primary's order."""
    truncated = len(primary) > MAX_COMPARED_CHARS or len(duplicate) > MAX_COMPARED_CHARS
    a = primary[:MAX_COMPARED_CHARS].split()
    b = duplicate[:MAX_COMPARED_CHARS].split()
    matcher = SequenceMatcher(None, a, b, autojunk=False)
    passages: list[Passage] = []
    seen: set[tuple[str, str]] = set()
    for hunk in matcher.get_grouped_opcodes(CONTEXT_WORDS):
        changed_a = " ".join(w for tag, i1, i2, _, _ in hunk if tag != "equal" for w in a[i1:i2])
        changed_b = " ".join(w for tag, _, _, j1, j2 in hunk if tag != "equal" for w in b[j1:j2])
        if (changed_a, changed_b) in seen:
            continue  # the same change again (a chunk overlap the join did not take out)
        seen.add((changed_a, changed_b))
        first, last = hunk[0], hunk[-1]
        passages.append(
            Passage(
                primary=_side(a, first[1], last[2]),
                duplicate=_side(b, first[3], last[4]),
                primary_changed=_bounded(changed_a),
                duplicate_changed=_bounded(changed_b),
            )
        )
    return Difference(
        document_id=document_id,
        compared_with=primary_id,
        identical=not passages,
        passages=tuple(passages[:MAX_PASSAGES]),
        omitted=max(0, len(passages) - MAX_PASSAGES),
        truncated=truncated,
    )


def _side(words: list[str], start: int, end: int) -> str:
    text = " ".join(words[start:end])
    if not text:
        return ""
    return ("…" if start > 0 else "") + _bounded(text) + ("…" if end < len(words) else "")


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_PASSAGE_CHARS else text[: MAX_PASSAGE_CHARS - 1] + "…"
