"""Signing in and the search playground, in Chromium against a live service."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, expect

from tests.console.conftest import Console
from tests.console.pages import checked, console_page, sign_in

pytestmark = pytest.mark.slow

GUIDE = (
    "# Operations guide\n\n## Backups\n\nBackups run nightly at 02:00 UTC and are kept for 30 "
    "days.\n\n## Restores\n\nRestores of a backup are tested every month on a scratch cluster."
)


def test_sign_in_search_with_citations_and_sign_out(browser: Browser, console: Console) -> None:
    tenant = console.new_tenant("t-search")
    console.ingest(
        tenant,
        title="Operations guide",
        content=GUIDE,
        source_type="markdown",
        source_url="https://example.com/ops",
        collection="handbook",
    )
    token = console.token(tenant)
    with console_page(browser, console) as watched:
        page = watched.page
        expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
        checked(page, "sign-in")
        sign_in(page, token)
        nav = page.get_by_role("navigation", name="Sections")
        expect(nav.get_by_role("link")).to_have_text(
            ["Overview", "Search", "Documents", "Jobs", "Duplicates", "Receipts"]
        )

        page.get_by_label("Query").fill("how long are backups kept?")
        page.get_by_role("button", name="Search", exact=True).click()
        first = page.locator(".cards > li").first
        expect(first).to_contain_text("Backups run nightly")
        expect(first.locator("mark").first).to_have_text(re.compile("backups", re.I))
        expect(first).to_contain_text("Operations guide → Backups")
        expect(first.get_by_role("link", name=re.compile(r"^example\.com\/ops"))).to_have_attribute(
            "href", "https://example.com/ops"
        )
        first.get_by_role("button", name="More like this").click()
        expect(first.get_by_role("region", name="More like this")).to_be_visible()

        page.get_by_label("Citation style").select_option("compact")
        page.get_by_role("button", name="Build context").click()
        context = page.locator(".context-view")
        expect(context.locator("pre")).to_contain_text("Backups run nightly")
        expect(context.locator(".citations")).to_contain_text("[Operations guide]")
        expect(context).to_contain_text("Tokens")
        checked(page, "search")

        # the token stays in this tab's sessionStorage only: no cookie, not in the URL
        stored = page.evaluate("sessionStorage.getItem('rag-console-token')")
        assert stored == token
        assert page.evaluate("document.cookie") == ""
        assert token not in page.url
        page.reload()
        expect(page.get_by_role("button", name="Sign out")).to_be_visible()
        page.get_by_role("button", name="Sign out").click()
        expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
        assert page.evaluate("sessionStorage.length") == 0


def test_scores_by_mode_neighbours_readable_citations_and_empty_states(
    browser: Browser, console: Console
) -> None:
    tenant = console.new_tenant("t-nits")
    with console_page(browser, console) as watched:
        page = watched.page
        sign_in(page, console.token(tenant))
        expect(
            page.get_by_text("No documents to search yet: upload some in Documents")
        ).to_be_visible()
        for title, url in (("Operations guide", "https://example.com/ops"), ("Runbook", None)):
            console.ingest(
                tenant,
                title=title,
                content=GUIDE.replace("Operations guide", title),
                source_type="markdown",
                source_url=url,
            )
        page.reload()
        page.get_by_label("Query").fill("backups kept")
        page.get_by_label("Mode").select_option("hybrid")
        page.get_by_role("button", name="Search", exact=True).click()
        first = page.locator(".cards > li").first
        expect(first).to_contain_text("Hybrid score")
        expect(page.locator(".cards")).not_to_contain_text("Similarity0.000")

        # more like this opens at a minimum that finds the other document's neighbour
        first.get_by_role("button", name="More like this").click()
        panel = first.get_by_role("region", name="More like this")
        expect(panel.get_by_label("Minimum similarity")).to_have_value("0")
        expect(panel.locator(".similar-list > li").first).to_be_visible()

        # the citations read as text with a link, not as markdown
        page.get_by_role("button", name="Build context").click()
        citations = page.locator(".context-view .citations")
        expect(citations).to_contain_text("Operations guide")
        expect(citations).not_to_contain_text("**")
        expect(citations.locator("strong").first).to_be_visible()
        link = citations.get_by_role("link", name=re.compile("^Source"))
        expect(link).to_have_attribute("href", "https://example.com/ops")
        checked(page, "search-nits")

        page.get_by_label("Query").fill("zebra quantum marmalade")
        page.get_by_label("Mode").select_option("keyword")
        page.get_by_role("button", name="Search", exact=True).click()
        expect(page.get_by_text("Nothing found. Try other words")).to_be_visible()
