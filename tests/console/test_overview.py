"""The signed-in tenant's overview (content, recent jobs, traffic, each with a next step) and
the header that names the tenant and what the token is."""

from __future__ import annotations

import re
import time

import httpx
import pytest
from playwright.sync_api import Browser, expect

from tests.console.conftest import Console
from tests.console.pages import checked, console_page, sign_in

pytestmark = pytest.mark.slow


def finished(console: Console, tenant: str, job_id: str) -> None:
    headers = {"Authorization": f"Bearer {console.token(tenant)}"}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        job = httpx.get(f"{console.url}/api/rag/jobs/{job_id}", headers=headers, timeout=30)
        if job.json()["status"] not in ("queued", "running"):
            return
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} did not finish")


def test_the_overview_shows_content_jobs_and_traffic(browser: Browser, console: Console) -> None:
    tenant = console.new_tenant("t-overview")
    headers = {"Authorization": f"Bearer {console.token(tenant)}"}
    console.ingest(tenant, title="Backups", content="Snapshots are kept 30 days.", collection="ops")
    files = [("files", ("on-call.md", b"# On-call\n\nThe primary is paged first.\n"))]
    reply = httpx.post(
        f"{console.url}/api/rag/jobs",
        files=files,
        data={"collection": "handbook"},
        headers=headers,
        timeout=60,
    )
    reply.raise_for_status()
    finished(console, tenant, reply.json()["job_id"])
    searched = httpx.post(
        f"{console.url}/api/rag/search", json={"query": "backups"}, headers=headers, timeout=60
    )
    searched.raise_for_status()
    with console_page(browser, console) as watched:
        page = watched.page
        sign_in(page, console.token(tenant))
        # the header: the tenant, then what the token is (its subject), never "a user"
        who = page.locator("#who-text")
        expect(who).to_contain_text(f"Tenant {tenant} (enterprise) · token for person-{tenant}")
        expect(who).to_contain_text(re.compile(r": ingest, search, until \d\d:\d\d"))
        page.get_by_role("link", name="Overview").click()
        expect(page.get_by_role("heading", name="Overview")).to_be_focused()
        content = page.locator(".details").first
        expect(content).to_contain_text("Documents2")
        expect(content).to_contain_text("Collections2")
        collections = page.get_by_role("table", name="Collections")
        expect(collections.get_by_role("row")).to_have_count(3)
        jobs = page.get_by_role("table", name="Recent jobs")
        expect(jobs.get_by_role("row").nth(1)).to_contain_text("on-call.md")
        expect(jobs.get_by_role("row").nth(1)).to_contain_text("handbook")
        expect(page.get_by_text("1 in the last hour, 1 in the last day").first).to_be_visible()
        expect(page.get_by_role("img", name=re.compile("Searches per hour"))).to_be_visible()
        checked(page, "overview")


def test_an_empty_tenants_overview_says_what_to_do_next(browser: Browser, console: Console) -> None:
    tenant = console.new_tenant("t-overview-empty")
    with console_page(browser, console) as watched:
        page = watched.page
        sign_in(page, console.token(tenant))
        page.get_by_role("link", name="Overview").click()
        expect(page.get_by_text("No documents yet: upload files in Documents")).to_be_visible()
        expect(page.get_by_text("No jobs yet: an upload in Documents")).to_be_visible()
        expect(page.get_by_text("No searches in the last day: try one in Search")).to_be_visible()
        checked(page, "overview-empty")
