"""A person in the OpenAPI explorer: headless Chromium loads /docs from a real server with
every request elsewhere blocked, authorizes with a token, runs a search through "Try it out"
and sees a 200 with chunks. The screenshot is kept in .artifacts/ (git-ignored)."""

from __future__ import annotations

import pytest
from playwright.sync_api import sync_playwright

from tests.api.live import LiveServer
from tests.browser import artifact, chromium, only_origin

TIMEOUT_MS = 60_000


@pytest.mark.slow
def test_a_person_authorizes_and_searches_in_the_explorer(live: LiveServer) -> None:
    blocked: list[str] = []
    with sync_playwright() as playwright, chromium(playwright) as browser:
        page = browser.new_page(viewport={"width": 1280, "height": 2200})
        page.set_default_timeout(TIMEOUT_MS)
        page.route("**/*", only_origin(live.url, blocked))
        page.goto(f"{live.url}/docs")
        page.wait_for_selector(".swagger-ui .info .title")

        page.click("button.authorize")
        page.fill(".modal-ux input[type=text], .modal-ux input[type=password]", live.token)
        page.click(".modal-ux .auth-btn-wrapper button.authorize")
        page.click(".modal-ux button.btn-done")

        operation = page.locator("#operations-search-search_chunks_api_rag_search_post")
        operation.locator(".opblock-summary").click()
        operation.locator("button.try-out__btn").click()
        operation.locator("button.execute").click()
        status = operation.locator(".live-responses-table .response .response-col_status")
        status.first.wait_for()
        body = operation.locator(".live-responses-table .response-col_description pre")
        reply = body.first.inner_text()
        page.screenshot(path=str(artifact("explorer-search.png")), full_page=True)
        assert status.first.inner_text().strip() == "200", reply
    assert '"chunks"' in reply
    assert "Backups run nightly" in reply
    assert blocked == []
