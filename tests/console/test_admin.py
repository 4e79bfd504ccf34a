"""Administration in the console: tenants with their counts and storage, create, change tier,
suspend (its token is refused at once), stats with hourly charts, the audit log, delete with
the id typed again; a tenant token sees none of it and is refused by the API if it tries."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, expect

from tests.console.conftest import Console
from tests.console.pages import checked, console_page, sign_in

pytestmark = pytest.mark.slow


def test_an_admin_suspends_a_tenant_whose_console_is_then_refused(
    browser: Browser, console: Console
) -> None:
    tenant = console.new_tenant("t-victim", name="Victim Ltd")
    console.ingest(tenant, title="Handbook", content="Holidays are booked in the portal.")
    with (
        console_page(browser, console) as as_tenant,
        console_page(browser, console) as as_admin,
    ):
        person = as_tenant.page
        sign_in(person, console.token(tenant))
        nav = person.get_by_role("navigation", name="Sections")
        expect(nav.get_by_role("link", name="Tenants")).to_have_count(0)
        person.goto(f"{console.url}/console/#/tenants")  # typed by hand: the API refuses it
        expect(person.get_by_role("alert")).to_contain_text("needs the rag:admin scope")

        admin = as_admin.page
        sign_in(admin, console.admin.token)
        admin.get_by_role("link", name="Tenants").click()
        row = admin.get_by_role("row").filter(has_text=tenant)
        expect(row).to_contain_text("Victim Ltd")
        expect(row).to_contain_text("active")
        expect(row.get_by_role("cell").nth(6)).to_have_text(re.compile(r"^\d+(\.\d)? [kM]?B$"))
        checked(admin, "tenants")

        row.get_by_role("button", name=f"Suspend {tenant}").click()
        admin.get_by_role("dialog").get_by_role("button", name="Suspend").click()
        expect(admin.get_by_role("status")).to_contain_text(f"Tenant {tenant} is suspended")
        expect(admin.get_by_role("row").filter(has_text=tenant)).to_contain_text("suspended")

        # the tenant's next call is refused: back to sign-in with the API's reason
        person.get_by_role("link", name="Search").click()
        expect(person.get_by_role("heading", name="Sign in")).to_be_visible()
        expect(person.get_by_role("alert")).to_contain_text(f"tenant '{tenant}' is suspended")

        admin.get_by_role("link", name=tenant).click()
        expect(admin.get_by_role("heading", name=f"Tenant {tenant}")).to_be_visible()
        expect(admin.get_by_role("img", name=re.compile("^Searches per hour"))).to_be_visible()
        expect(
            admin.get_by_role("img", name=re.compile("^Ingests per hour: 1 documents"))
        ).to_be_visible()
        admin.get_by_label("Tier", exact=True).select_option("pro")
        admin.get_by_role("button", name="Save changes").click()
        expect(admin.get_by_role("status")).to_contain_text(f"Tenant {tenant} changed")
        expect(admin.locator(".details").first).to_contain_text("pro")
        checked(admin, "tenant")

        admin.get_by_role("link", name="Its audit log").click()
        entries = admin.get_by_role("table", name=re.compile("Audit log entries"))
        expect(entries.get_by_role("row")).to_have_count(4)  # header, create, suspend, update
        expect(entries.get_by_role("row").nth(1)).to_contain_text('tier: "enterprise" → "pro"')
        expect(entries.get_by_role("row").nth(2)).to_contain_text("tenant.suspend")
        expect(entries.get_by_role("row").nth(1)).to_contain_text("token of ")  # who: a token
        checked(admin, "audit")

        admin.get_by_role("link", name="Tenants").click()
        admin.get_by_role("button", name=f"Delete {tenant}").click()
        dialog = admin.get_by_role("dialog")
        dialog.get_by_label(re.compile("to confirm")).fill("not-the-id")
        dialog.get_by_role("button", name="Delete tenant").click()
        expect(admin.get_by_role("alert")).to_contain_text("confirm must repeat the tenant id")
        admin.get_by_role("button", name=f"Delete {tenant}").click()
        admin.get_by_role("dialog").get_by_label(re.compile("to confirm")).fill(tenant)
        admin.get_by_role("dialog").get_by_role("button", name="Delete tenant").click()
        expect(admin.get_by_role("status")).to_contain_text(f"Tenant {tenant} deleted")
        expect(admin.get_by_role("row").filter(has_text=tenant)).to_have_count(0)


def test_an_admin_creates_a_tenant(browser: Browser, console: Console) -> None:
    with console_page(browser, console) as watched:
        page = watched.page
        sign_in(page, console.admin.token)
        page.get_by_role("link", name="Tenants").click()
        form = page.get_by_role("form", name="New tenant")
        form.get_by_label("Id", exact=True).fill("t-new-console")
        form.get_by_label("Name", exact=True).fill("New from the console")
        form.get_by_label("Tier", exact=True).select_option("basic")
        form.get_by_role("button", name="Create tenant").click()
        expect(page.get_by_role("status")).to_contain_text("Tenant t-new-console created")
        row = page.get_by_role("row").filter(has_text="t-new-console")
        expect(row).to_contain_text("New from the console")
        form = page.get_by_role("form", name="New tenant")
        form.get_by_label("Id", exact=True).fill("t-new-console")
        form.get_by_role("button", name="Create tenant").click()
        expect(page.get_by_role("status")).to_contain_text("existed already")
        form = page.get_by_role("form", name="New tenant")
        form.get_by_label("Id", exact=True).fill("bad id!")
        form.get_by_role("button", name="Create tenant").click()
        expect(form.get_by_role("alert")).to_contain_text("id")
