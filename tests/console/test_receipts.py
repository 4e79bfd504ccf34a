"""Receipts in the console: every collection sync and document deletion listed with what it
counted, and one read whole (the documents added, updated and deleted, and that nothing of the
deleted ones is left)."""

from __future__ import annotations

import httpx
import pytest
from playwright.sync_api import Browser, expect

from tests.console.conftest import Console
from tests.console.pages import checked, console_page, sign_in

pytestmark = pytest.mark.slow


def synced(console: Console, tenant: str, documents: list[dict[str, str]]) -> None:
    reply = httpx.post(
        f"{console.url}/api/rag/collections/help/sync",
        json={"documents": documents},
        headers={"Authorization": f"Bearer {console.token(tenant)}"},
        timeout=60,
    )
    reply.raise_for_status()


def test_receipts_are_listed_and_read_whole(browser: Browser, console: Console) -> None:
    tenant = console.new_tenant("t-receipts")
    backups = {"external_id": "backups.md", "content": "Backups are kept 30 days.", "version": "v1"}
    stale = {"external_id": "backups-old.md", "content": "Backups are kept 14 days."}
    synced(console, tenant, [backups, stale])
    synced(console, tenant, [backups])  # the stale copy goes
    with console_page(browser, console) as watched:
        page = watched.page
        sign_in(page, console.token(tenant))
        page.get_by_role("link", name="Receipts").click()
        expect(page.get_by_role("heading", name="Receipts")).to_be_focused()
        listed = page.get_by_role("table", name="Receipts, newest first")
        rows = listed.get_by_role("row")
        expect(rows).to_have_count(3)
        expect(rows.nth(1)).to_contain_text("collection sync")
        expect(rows.nth(1)).to_contain_text("help")
        rows.nth(1).get_by_role("link").click()
        expect(page.get_by_role("heading", name="Receipt")).to_be_focused()
        deleted = page.get_by_role("table", name="Deleted (1)")
        expect(deleted).to_contain_text("backups-old.md")
        expect(page.get_by_text("nothing (checked after the deletion)")).to_be_visible()
        expect(page.get_by_text("Added: none.")).to_be_visible()
        checked(page, "receipts")


def test_a_tenant_without_receipts_is_told_what_writes_one(
    browser: Browser, console: Console
) -> None:
    tenant = console.new_tenant("t-receipts-empty")
    with console_page(browser, console) as watched:
        page = watched.page
        sign_in(page, console.token(tenant))
        page.get_by_role("link", name="Receipts").click()
        expect(page.get_by_text("No receipts yet: deleting a document in")).to_be_visible()
        checked(page, "receipts-empty")
