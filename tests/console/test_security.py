"""What the console must never do: run what documents, tenants or users wrote, keep a token
anywhere but the tab, or go on with a refused token; and what it must say when the API says
no (a refused or expired token, a rate limit)."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.console.conftest import TINY_TIER, Console
from tests.console.pages import checked, console_page, section, sign_in

pytestmark = pytest.mark.slow

RLO = "\u202e"
HOSTILE_TITLE = f'<img src=x onerror="window.__pwned=1"> Salary {RLO}fdp.exe'
HOSTILE_CONTENT = (
    "<script>window.__pwned = 2</script> Quarterly salary review. "
    '<img src=x onerror="window.__pwned=3"> [click me](javascript:window.__pwned=4) '
    f'<a href="javascript:window.__pwned=5">salary link</a> {RLO}gnp.tpircs'
)
HOSTILE_URL = "javascript://example.com/%0Awindow.__pwned=6"


def assert_nothing_ran(page: Page) -> None:
    assert page.evaluate("window.__pwned") is None
    assert page.locator("img").count() == 0  # the console draws no image; data made none
    assert page.locator("script:not([src])").count() == 0
    assert page.locator('a[href^="javascript" i]').count() == 0


def test_hostile_documents_and_names_are_shown_inert(browser: Browser, console: Console) -> None:
    tenant = console.new_tenant("t-xss", name='<script>window.__pwned=7</script>Evil "Corp"')
    console.ingest(
        tenant,
        title=HOSTILE_TITLE,
        content=HOSTILE_CONTENT,
        source_url=HOSTILE_URL,
        external_id=f"<b>bold</b>{RLO}.md",
        collection="x<svg onload=window.__pwned=8>",
        metadata={"note": "<iframe src=javascript:window.__pwned=9>"},
    )
    with console_page(browser, console) as watched:
        page = watched.page
        sign_in(page, console.admin.token)
        page.goto(f"{console.url}/console/#/tenants")
        expect(page.get_by_role("row").filter(has_text=tenant)).to_contain_text(
            '<script>window.__pwned=7</script>Evil "Corp"'
        )
        assert_nothing_ran(page)
        page.goto(f"{console.url}/console/#/tenants/{tenant}")
        expect(page.get_by_role("heading", name=f"Tenant {tenant}")).to_be_visible()
        assert_nothing_ran(page)
        page.goto(f"{console.url}/console/#/audit?tenant_id={tenant}")
        expect(page.get_by_role("table")).to_contain_text("<script>window.__pwned=7</script>")
        assert_nothing_ran(page)

    with console_page(browser, console) as watched:
        page = watched.page
        sign_in(page, console.token(tenant))
        page.get_by_label("Query").fill("salary review")
        page.get_by_role("button", name="Search", exact=True).click()
        card = page.locator(".cards > li").first
        expect(card).to_contain_text("<script>window.__pwned = 2</script>")
        title = card.get_by_role("heading")
        expect(title).to_contain_text('<img src=x onerror="window.__pwned=1"> Salary')
        # the right-to-left override is shown as a mark, not obeyed
        expect(title.locator(".control-char")).to_have_text("U+202E")
        assert RLO not in title.inner_text()
        expect(card.locator(".inert-url")).to_contain_text("javascript://example.com/")
        page.get_by_role("button", name="Build context").click()
        expect(page.locator(".context-view pre")).to_contain_text("<script>")
        assert_nothing_ran(page)
        checked(page, "hostile-search")

        card.get_by_role("link", name="Open document").click()
        expect(page.locator(".chunks")).to_contain_text("javascript:window.__pwned=4")
        expect(page.locator(".json")).to_contain_text("<iframe src=javascript:window.__pwned=9>")
        page.get_by_role("link", name="← Documents").click()
        expect(page.get_by_role("table", name="Documents")).to_contain_text("<b>bold</b>")
        page.get_by_role("link", name="Duplicates").click()
        # the duplicates page's own form: the documents page just left has two "Collection"s
        found = page.get_by_role("form", name="Find duplicates").get_by_label("Collection")
        expect(found).to_contain_text("x<svg onload=window.__pwned=8>")
        assert_nothing_ran(page)


def test_a_refused_token_brings_back_sign_in_with_the_apis_reason(
    browser: Browser, console: Console
) -> None:
    tenant = console.new_tenant("t-refused")
    with console_page(browser, console) as watched:
        page = watched.page
        sign_in_refused(page, "not-a-token")
        expect(page.get_by_role("alert")).to_contain_text("invalid token")
        sign_in_refused(page, issue_expired(console, tenant))
        expect(page.get_by_role("alert")).to_contain_text("token expired")

        expires = time.time() + 8
        sign_in(page, console.token(tenant, ttl=8))
        page.get_by_label("Query").fill("anything")
        time.sleep(max(0.0, expires + 1.5 - time.time()))
        page.get_by_role("button", name="Search", exact=True).click()
        expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
        expect(page.get_by_role("alert")).to_contain_text("token expired")
        assert page.evaluate("sessionStorage.length") == 0


def sign_in_refused(page: Page, token: str) -> None:
    """Sign in with a token the API refuses: the console forgets it and says why."""
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    # the token is forgotten and the sign-in drawn anew with the reason (polled from here:
    # the page's policy refuses the string evaluation wait_for_function would use)
    deadline = time.monotonic() + 10
    while page.evaluate("sessionStorage.length") != 0:
        assert time.monotonic() < deadline, "the refused token was not forgotten"
        time.sleep(0.05)
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.get_by_role("alert")).to_be_visible()


def issue_expired(console: Console, tenant_id: str) -> str:
    from app.auth import issue_token

    return issue_token(
        console.settings,
        tenant_id=tenant_id,
        subject="late",
        scopes=["rag:search"],
        ttl_seconds=60,
        now=time.time() - 3600,
    )


def test_a_rate_limit_says_when_to_try_again(browser: Browser, console: Console) -> None:
    tenant = console.new_tenant("t-tiny", tier=TINY_TIER)
    with console_page(browser, console) as watched:
        page = watched.page
        sign_in(page, console.token(tenant))
        page.get_by_label("Query").fill("anything")
        search = page.get_by_role("button", name="Search", exact=True)
        alert = page.get_by_role("alert")
        for _ in range(10):
            search.click()
            expect(search).to_be_enabled()
            if alert.is_visible():
                break
        expect(alert).to_contain_text(re.compile(r"Too many requests.*Try again in \d+ s \(at "))


def test_the_keyboard_reaches_everything_from_sign_in_to_a_search(
    browser: Browser, console: Console
) -> None:
    with console_page(browser, console) as watched:
        page = watched.page
        expect(page.get_by_label("Token")).to_be_focused()
        # the skip link is the first stop of the page, and leads to the content
        page.keyboard.press("Shift+Tab")
        expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.get_by_role("main")).to_be_focused()
        page.keyboard.press("Tab")
        expect(page.get_by_label("Token")).to_be_focused()
        page.keyboard.type(console.admin.token)
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", name="Search")).to_be_focused()
        page.keyboard.press("Tab")
        expect(page.get_by_label("Query")).to_be_focused()
        page.keyboard.type("backups")
        page.keyboard.press("Enter")
        expect(page.locator(".cards > li").first).to_contain_text("Backups run nightly")
        # the sections one Tab apart; a new page moves the focus to its heading
        page.get_by_role("link", name="Search").focus()
        page.keyboard.press("Tab")
        expect(section(page, "Documents")).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", name="Documents", exact=True)).to_be_focused()
        # a dialog takes the focus, and Escape closes it
        page.get_by_role("button", name=re.compile("^Delete ")).first.focus()
        page.keyboard.press("Enter")
        expect(page.get_by_role("dialog").get_by_role("button", name="Cancel")).to_be_focused()
        page.keyboard.press("Escape")
        expect(page.get_by_role("dialog")).to_be_hidden()
