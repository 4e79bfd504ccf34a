"""Duplicates in the console: the preview's groups, which copy each strategy keeps, what
differs between the copies, and a merge only once a strategy is chosen, after a confirmation
that names what it deletes."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, expect

from tests.console.conftest import Console
from tests.console.pages import checked, console_page, sign_in

pytestmark = pytest.mark.slow

TUTORIAL = Path(__file__).parents[2] / "examples" / "tutorial"
BACKUPS = "Nightly snapshots are kept for 30 days; monthly ones for a year. Restores take an hour."


def test_a_dedupe_preview_then_a_merge(browser: Browser, console: Console) -> None:
    tenant = console.new_tenant("t-dedupe")
    first = console.ingest(tenant, title="Backups", content=BACKUPS, external_id="backups.md")
    copy = console.ingest(
        tenant, title="Backups (old copy)", content=BACKUPS, external_id="backups-old.md"
    )
    other = console.ingest(tenant, title="On-call", content="Alerts page the primary first.")
    with console_page(browser, console) as watched:
        page = watched.page
        sign_in(page, console.token(tenant))
        page.get_by_role("link", name="Duplicates").click()
        page.get_by_label("Merge strategy").select_option("keep_oldest")
        page.get_by_role("button", name="Preview").click()
        group = page.get_by_role("article", name="Group 1")
        expect(group.get_by_role("heading", level=3)).to_contain_text("2 documents, similarity 0.9")
        rows = group.get_by_role("row")
        expect(rows).to_have_count(3)
        expect(page.locator(".summary")).to_have_text(
            "1 group, 1 duplicate among 3 documents examined."
        )
        oldest = group.get_by_role("row").filter(has_text="backups.md").first
        expect(oldest.get_by_role("cell").last).to_have_text("kept")
        newest = group.get_by_role("row").filter(has_text="backups-old.md")
        expect(newest.get_by_role("cell").last).to_have_text("deleted")
        # the last-ingested column marks the copy, the first-ingested column the first one
        expect(newest.get_by_role("cell").nth(8)).to_have_text("✓ kept")
        expect(oldest.get_by_role("cell").nth(9)).to_have_text("✓ kept")
        expect(group.get_by_role("region", name="What differs")).to_contain_text(
            "backups-old.md and backups.md: the same text."
        )
        checked(page, "duplicates")

        page.get_by_role("button", name="Merge…").click()
        dialog = page.get_by_role("dialog")
        expect(dialog).to_contain_text("1 document in 1 group will be deleted")
        expect(dialog.get_by_role("list", name="Documents to be deleted")).to_have_text(
            "Backups (old copy) (default/backups-old.md)"
        )
        dialog.get_by_role("button", name="Merge").click()
        expect(page.get_by_role("status")).to_contain_text("Merged: 1 duplicate document deleted")
        expect(page.get_by_role("region", name="Duplicate groups")).to_contain_text(
            "1 document deleted, 1 group merged."
        )
        page.get_by_role("button", name="Preview").click()  # nothing left: what to do next
        expect(page.locator(".summary")).to_have_text(
            "0 groups, 0 duplicates among 2 documents examined."
        )
        expect(page.get_by_text("No near-duplicates at this threshold: lower it")).to_be_visible()
    headers = {"Authorization": f"Bearer {console.token(tenant)}"}
    listed = httpx.get(f"{console.url}/api/rag/documents", headers=headers, timeout=30).json()
    assert {d["document_id"] for d in listed["items"]} == {first, other}
    assert copy not in {d["document_id"] for d in listed["items"]}


def test_the_tutorials_merge_shows_what_differs_and_waits_for_a_choice(
    browser: Browser, console: Console
) -> None:
    """The current backups page ingested first, an outdated copy (14 days, not 30) after: the
    preview shows the differing passage, Merge asks for a strategy, the dialog names the page
    that goes, and the current page stays."""
    tenant = console.new_tenant("t-tutorial")
    current = console.ingest(
        tenant,
        title="Backups",
        content=(TUTORIAL / "handbook" / "backups.md").read_text(),
        external_id="backups.md",
        source_type="markdown",
    )
    outdated = console.ingest(
        tenant,
        title="Backups",
        content=(TUTORIAL / "backups-old.md").read_text(),
        external_id="backups-old.md",
        source_type="markdown",
    )
    with console_page(browser, console) as watched:
        page = watched.page
        sign_in(page, console.token(tenant))
        page.get_by_role("link", name="Duplicates").click()
        expect(page.get_by_label("Merge strategy")).to_have_value("")  # no choice made for you
        page.get_by_role("button", name="Preview").click()
        group = page.get_by_role("article", name="Group 1")
        differs = group.get_by_role("region", name="What differs")
        expect(differs).to_contain_text("1 passage differs")
        expect(differs.locator("mark")).to_have_text(["14", "30"])  # primary: last ingested
        expect(differs).to_contain_text("Nightly snapshots are kept for 30 days")
        for row in group.get_by_role("row").all()[1:]:
            expect(row.get_by_role("cell").last).to_have_text("choose a strategy")
        checked(page, "duplicates-differences")

        page.get_by_role("button", name="Merge…").click()  # no strategy yet: refused, nothing asked
        expect(page.get_by_role("alert")).to_contain_text("Choose what each group keeps")
        expect(page.get_by_role("dialog")).to_be_hidden()
        expect(page.get_by_label("Merge strategy")).to_be_focused()

        page.get_by_label("Merge strategy").select_option("keep_oldest")  # the tutorial's choice
        kept = group.get_by_role("row").filter(has_text="backups.md").first
        expect(kept.get_by_role("cell").last).to_have_text("kept")
        page.get_by_role("button", name="Merge…").click()
        dialog = page.get_by_role("dialog")
        expect(dialog).to_contain_text("each group keeps its first ingested copy")
        expect(dialog.get_by_role("list", name="Documents to be deleted")).to_have_text(
            "Backups (default/backups-old.md)"
        )
        checked(page, "duplicates-confirm")
        dialog.get_by_role("button", name="Merge").click()
        expect(page.get_by_role("status")).to_contain_text("Merged: 1 duplicate document deleted")
    headers = {"Authorization": f"Bearer {console.token(tenant)}"}
    listed = httpx.get(f"{console.url}/api/rag/documents", headers=headers, timeout=30).json()
    assert {d["document_id"] for d in listed["items"]} == {current}
    assert outdated not in {d["document_id"] for d in listed["items"]}
