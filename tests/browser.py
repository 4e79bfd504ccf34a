"""Debian's Chromium driven by Playwright (which cannot download a browser here): one way to
launch it, one guard that keeps a page on the service under test, one artifacts folder."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Playwright, Route

ARTIFACTS = Path(__file__).resolve().parents[1] / ".artifacts"  # git-ignored
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-dev-shm-usage",
    "--disable-gpu",
    "--disable-background-networking",
]


@contextmanager
def chromium(playwright: Playwright) -> Iterator[Browser]:
    """Headless Chromium, closed at the end of the block."""
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed (scripts/test installs it with apt-get)")
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    try:
        yield browser
    finally:
        browser.close()


def only_origin(origin: str, blocked: list[str]) -> Callable[[Route], None]:
    """A route handler letting requests to `origin` through; any other is aborted and noted
    in `blocked` (so a test can say the page loaded nothing from elsewhere)."""

    def handle(route: Route) -> None:
        if route.request.url.startswith(origin + "/"):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    return handle


def artifact(*parts: str) -> Path:
    """A path under .artifacts/, its folder made."""
    path = ARTIFACTS.joinpath(*parts)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path
