"""A person in the OpenAPI explorer: headless Chromium loads /docs from a real server with
every request elsewhere blocked, authorizes with a token, runs a search through "Try it out"
and sees a 200 with chunks. The screenshot is kept in .artifacts/ (git-ignored)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from playwright.sync_api import Route, sync_playwright

from tests.api.live import LiveServer

ARTIFACTS = Path(__file__).resolve().parents[2] / ".artifacts"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
TIMEOUT_MS = 60_000


@pytest.mark.slow
def test_a_person_authorizes_and_searches_in_the_explorer(live: LiveServer) -> None:
    if not Path(CHROMIUM).exists():
        pytest.fail("chromium is not installed (scripts/test installs it with apt-get)")
    blocked: list[str] = []

    def only_the_service(route: Route) -> None:
        if route.request.url.startswith(live.url + "/"):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 2200})
            page.set_default_timeout(TIMEOUT_MS)
            page.route("**/*", only_the_service)
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
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "explorer-search.png"), full_page=True)
            assert status.first.inner_text().strip() == "200", reply
        finally:
            browser.close()
    assert '"chunks"' in reply
    assert "Backups run nightly" in reply
    assert blocked == []
