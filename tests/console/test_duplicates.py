"""Duplicates in the console: the preview's groups, which copy each strategy keeps, and a
merge after confirmation."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import Browser, expect

from tests.console.conftest import Console
from tests.console.pages import checked, console_page, sign_in

pytestmark = pytest.mark.slow

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
        expect(group.get_by_role("heading")).to_contain_text("2 documents, similarity 0.9")
        rows = group.get_by_role("row")
        expect(rows).to_have_count(3)
        expect(page.locator(".summary")).to_have_text(
            "1 group, 1 duplicate among 3 documents examined."
        )
        oldest = group.get_by_role("row").filter(has_text="backups.md").first
        expect(oldest.get_by_role("cell").last).to_have_text("kept")
        newest = group.get_by_role("row").filter(has_text="backups-old.md")
        expect(newest.get_by_role("cell").last).to_have_text("deleted")
        # the newest-keeps column marks the copy, the oldest-keeps column the first one
        expect(newest.get_by_role("cell").nth(6)).to_have_text("✓ kept")
        expect(oldest.get_by_role("cell").nth(7)).to_have_text("✓ kept")
        checked(page, "duplicates")

        page.get_by_role("button", name="Merge…").click()
        dialog = page.get_by_role("dialog")
        expect(dialog).to_contain_text("1 document in 1 group will be deleted")
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
