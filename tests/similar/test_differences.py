"""What differs between two copies, as pure functions: word-level passages with context,
bounded; a document's text from overlapping chunks; which versions compare and how."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from app.retrieval.differences import MAX_PASSAGE_CHARS, MAX_PASSAGES, compare, joined
from app.retrieval.duplicates import Examined, MergeStrategy, primary_of, versions

A, B = uuid.uuid4(), uuid.uuid4()


def test_a_changed_word_is_one_passage_with_its_context() -> None:
    before = "one two three four five six seven 30 eight nine ten eleven twelve thirteen"
    after = before.replace(" 30 ", " 14 ")
    difference = compare(A, before, B, after)
    assert (difference.document_id, difference.compared_with) == (B, A)
    [passage] = difference.passages
    assert (
        passage.primary == "…two three four five six seven 30 eight nine ten eleven twelve thirteen"
    )
    assert (
        passage.duplicate
        == "…two three four five six seven 14 eight nine ten eleven twelve thirteen"
    )
    assert (passage.primary_changed, passage.duplicate_changed) == ("30", "14")
    assert not difference.identical


def test_added_text_has_an_empty_changed_side_and_whitespace_alone_is_no_difference() -> None:
    added = compare(A, "alpha beta", B, "alpha beta gamma")
    [passage] = added.passages
    assert (passage.primary_changed, passage.duplicate_changed) == ("", "gamma")
    assert compare(A, "alpha  beta\n", B, "alpha beta").identical


def test_passages_are_bounded_in_number_and_size() -> None:
    words = [f"w{i}" for i in range(400)]
    changed = [f"x{i}" if i % 40 == 0 else w for i, w in enumerate(words)]
    difference = compare(A, " ".join(words), B, " ".join(changed))
    assert len(difference.passages) == MAX_PASSAGES
    assert difference.omitted == 10 - MAX_PASSAGES
    long = compare(A, "a " + "b" * 1000, B, "a " + "c" * 1000)
    assert all(len(p.primary) <= MAX_PASSAGE_CHARS + 2 for p in long.passages)


def test_overlapping_chunks_join_into_the_text_once() -> None:
    first = "Backups run nightly at two in the morning and are copied to a second region."
    second = "are copied to a second region. Restores take an hour."
    assert joined([first, second]) == (
        "Backups run nightly at two in the morning and are copied to a second region.\n"
        "Restores take an hour."
    )
    assert joined(["short", "other"]) == "short\nother"


def doc(version: str | None, day: int = 1) -> Examined:
    when = datetime(2026, 1, day, tzinfo=UTC)
    return Examined(uuid.uuid4(), "t", "c", f"e{day}", when, when, 0, (), version)


def test_versions_compare_only_when_all_are_numbers_or_all_iso_times() -> None:
    assert versions([doc("2"), doc("10", 2)]).kind == "number"
    assert versions([doc("2026-01-01T10:00:00+02:00"), doc("2026-01-01T09:00:00Z", 2)]).kind == (
        "iso_time"
    )
    assert versions([doc("3"), doc("2026-01-01", 2)]).reason == (
        "the versions mix numbers and ISO 8601 times"
    )
    assert versions([doc(None), doc("1", 2)]).reason == "c/e1 carries no version"
    assert versions([doc("nan"), doc("1", 2)]).kind is None


def test_latest_version_keeps_the_latest_revision_or_else_the_last_ingested() -> None:
    later_time_first = [doc("2026-03-01T00:00:00Z", 1), doc("2026-02-01T00:00:00Z", 2)]
    # 10:00+02:00 is 08:00 UTC: earlier than 09:00Z
    zoned = [doc("2026-01-01T10:00:00+02:00", 1), doc("2026-01-01T09:00:00Z", 2)]
    unversioned = [doc(None, 1), doc("5", 2)]
    latest = MergeStrategy.KEEP_LATEST_VERSION
    assert primary_of(later_time_first, latest) is later_time_first[0]
    assert primary_of(zoned, latest) is zoned[1]
    assert primary_of(unversioned, latest) is unversioned[1]  # the last ingested
