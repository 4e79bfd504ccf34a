"""Driving the console in a browser: a guarded page, signing in, and each page's check (an
accessibility audit by axe-core, which the test injects, and a screenshot in .artifacts/)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, ConsoleMessage, Dialog, Locator, Page, expect

from tests.browser import artifact, only_origin
from tests.console.conftest import Console

TIMEOUT_MS = 30_000
AXE = Axe()
# WCAG 2.1 A and AA and axe's best practices; serious and critical findings fail the test.
AXE_OPTIONS = {
    "runOnly": {
        "type": "tag",
        "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"],
    },
    "resultTypes": ["violations"],
}
FAILING_IMPACTS = {"serious", "critical"}


@dataclass(slots=True)
class Watched:
    """What a page did that it must not: dialogs it opened, requests elsewhere, policy
    violations and script errors it reported."""

    page: Page
    dialogs: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def assert_clean(self) -> None:
        assert self.dialogs == [], self.dialogs
        assert self.blocked == [], self.blocked
        assert self.errors == [], self.errors


@contextmanager
def console_page(browser: Browser, console: Console) -> Iterator[Watched]:
    """A fresh browser context (its own sessionStorage) on the console; what it did is
    checked at the end."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    watched = Watched(page)
    page.route("**/*", only_origin(console.url, watched.blocked))

    def on_dialog(dialog: Dialog) -> None:
        watched.dialogs.append(dialog.message)
        dialog.dismiss()

    def on_console(message: ConsoleMessage) -> None:
        text = message.text
        # a refused API call is logged by the browser itself ("Failed to load resource")
        if message.type == "error" and "Failed to load resource" not in text:
            watched.errors.append(text)

    page.on("dialog", on_dialog)
    page.on("console", on_console)
    page.on("pageerror", lambda error: watched.errors.append(str(error)))
    try:
        page.goto(f"{console.url}/console")
        yield watched
    finally:
        context.close()
    watched.assert_clean()


def section(page: Page, name: str) -> Locator:
    """The link to a section in the navigation: a page may link to a section too (the search
    page's empty state links to Documents), and which is drawn first is a race."""
    return page.get_by_role("navigation", name="Sections").get_by_role("link", name=name)


def sign_in(page: Page, token: str) -> None:
    page.get_by_label("Token").fill(token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()


def checked(page: Page, name: str) -> None:
    """No serious accessibility violation on the page as it is now; a screenshot of it."""
    results = AXE.run(page, options=AXE_OPTIONS)
    serious = [
        f"{v['id']} ({v['impact']}): {v['help']} at {[n['target'] for n in v['nodes']]}"
        for v in results.response["violations"]
        if v["impact"] in FAILING_IMPACTS
    ]
    page.screenshot(path=str(artifact("console", f"{name}.png")), full_page=True)
    assert serious == [], serious
