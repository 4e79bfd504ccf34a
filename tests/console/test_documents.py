"""Documents and jobs in the console: an upload followed through its job, a folder, a
document's chunks and citations, delete after confirmation, and a job cancelled."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, expect

from app.ingest.parsing import SourceType
from tests.console.conftest import Console
from tests.console.pages import checked, console_page, section, sign_in
from tests.ingest.office import docx_bytes

pytestmark = pytest.mark.slow


def test_an_upload_is_followed_through_its_job_to_its_documents(
    browser: Browser, console: Console, tmp_path: Path
) -> None:
    tenant = console.new_tenant("t-upload")
    (tmp_path / "notes.md").write_text("# Release notes\n\nVersion 2 adds hybrid search.\n")
    (tmp_path / "broken.pdf").write_bytes(b"%PDF-1.7\nthis is not a PDF at all")
    folder = tmp_path / "guides"
    (folder / "setup").mkdir(parents=True)
    (folder / "setup" / "install.md").write_text("# Install\n\nRun the installer twice.\n")
    (folder / "usage.md").write_text("# Usage\n\nAsk questions in plain words.\n")
    with console_page(browser, console) as watched:
        page = watched.page
        sign_in(page, console.token(tenant))
        section(page, "Documents").click()
        expect(page.get_by_role("heading", name="Documents", exact=True)).to_be_focused()
        page.get_by_label("Files", exact=True).set_input_files(
            [tmp_path / "notes.md", tmp_path / "broken.pdf"]
        )
        page.get_by_label("Collection", exact=True).first.fill("releases")
        page.get_by_role("button", name="Upload").click()

        expect(page.get_by_role("heading", name="Ingestion job")).to_be_visible()
        expect(page.locator(".job .badge").first).to_have_text("partial", timeout=60_000)
        # the upload's message gives way to the job's end, never a stale "queued"
        expect(page.get_by_role("status")).to_have_text(
            "The job ended: partial, 1 document ingested, 1 failed."
        )
        files = page.get_by_role("table", name="Outcome per file")
        expect(files.get_by_role("row", name=re.compile("notes.md succeeded"))).to_be_visible()
        expect(files.get_by_role("row", name=re.compile("broken.pdf failed"))).to_be_visible()
        checked(page, "job")

        section(page, "Documents").click()
        page.get_by_label("Folder", exact=True).set_input_files(folder)
        page.get_by_role("button", name="Upload").click()
        expect(page.locator(".job .badge").first).to_have_text("succeeded", timeout=60_000)
        section(page, "Documents").click()
        page.get_by_role("link", name="Release notes").click()
        expect(page.get_by_role("heading", name="Release notes")).to_be_visible()
        expect(page.locator(".chunks")).to_contain_text("Version 2 adds hybrid search.")
        # the citation's markdown is shown as text: the title in bold, no asterisks
        first_citation = page.locator(".citation").first
        expect(first_citation).to_contain_text("[1] Release notes (Markdown)")
        expect(first_citation.locator("strong")).to_have_text("Release notes")
        expect(first_citation).not_to_contain_text("**")
        page.get_by_label("Citation style").select_option("compact")
        expect(page.locator(".citation").first).to_contain_text("[Release notes]")
        checked(page, "document")

        section(page, "Documents").click()
        table = page.get_by_role("table", name="Documents")
        expect(table.get_by_role("row")).to_have_count(4)  # the header and three documents
        expect(table).to_contain_text("guides/setup/install.md")  # a folder's relative path
        page.get_by_label("Collection", exact=True).last.select_option("releases")
        page.get_by_role("button", name="Apply").click()
        expect(table.get_by_role("row")).to_have_count(2)
        checked(page, "documents")

        page.get_by_role("button", name="Delete Release notes").click()
        dialog = page.get_by_role("dialog")
        expect(dialog).to_contain_text("cannot be undone")
        dialog.get_by_role("button", name="Cancel").click()
        expect(table.get_by_role("row")).to_have_count(2)
        page.get_by_role("button", name="Delete Release notes").click()
        page.get_by_role("dialog").get_by_role("button", name="Delete").click()
        expect(page.get_by_role("status")).to_contain_text("Deleted “Release notes”")
        expect(page.get_by_text("No document matches these filters")).to_be_visible()

        page.get_by_role("link", name="Jobs").click()
        jobs = page.get_by_role("table", name="Jobs")
        expect(jobs.get_by_role("row")).to_have_count(3)
        # each job named by its files and collection, not only by when it was submitted
        first_job = jobs.get_by_role("row").filter(has_text="notes.md")
        expect(first_job).to_contain_text("notes.md, broken.pdf")
        expect(first_job.get_by_role("cell").nth(2)).to_have_text("releases")
        checked(page, "jobs")


def test_a_running_job_is_cancelled(browser: Browser, console: Console) -> None:
    tenant = console.new_tenant("t-cancel")
    headers = {"Authorization": f"Bearer {console.token(tenant)}"}
    files = [
        ("files", (f"file-{n:03}.md", f"# File {n}\n\n{'Words to embed. ' * 200}".encode()))
        for n in range(150)
    ]
    reply = httpx.post(f"{console.url}/api/rag/jobs", files=files, headers=headers, timeout=60)
    reply.raise_for_status()
    job_id = reply.json()["job_id"]
    with console_page(browser, console) as watched:
        page = watched.page
        sign_in(page, console.token(tenant))
        page.goto(f"{console.url}/console/#/jobs/{job_id}")
        page.get_by_role("button", name="Cancel job").click()
        expect(page.locator(".job .badge").first).to_have_text("cancelled", timeout=60_000)
        expect(page.get_by_role("button", name="Cancel job")).to_be_hidden()
    job = httpx.get(f"{console.url}/api/rag/jobs/{job_id}", headers=headers, timeout=30).json()
    assert job["status"] == "cancelled"
    assert job["progress"]["documents_done"] < 150


def test_every_ingestible_format_is_offered_and_a_word_file_is_filtered(
    browser: Browser, console: Console, tmp_path: Path
) -> None:
    tenant = console.new_tenant("t-formats")
    (tmp_path / "handbook.docx").write_bytes(docx_bytes(title="Field Handbook"))
    (tmp_path / "notes.md").write_text("# Notes\n\nA markdown page.\n")
    labels = [source_type.label for source_type in SourceType]
    with console_page(browser, console) as watched:
        page = watched.page
        sign_in(page, console.token(tenant))
        page.get_by_role("link", name="Jobs").click()
        expect(
            page.get_by_text("No jobs yet: upload files or a folder in Documents")
        ).to_be_visible()
        section(page, "Documents").click()
        expect(page.get_by_text("No documents yet. Upload files or a folder")).to_be_visible()
        hint_id = page.get_by_label("Files", exact=True).get_attribute("aria-describedby")
        hint = page.locator(f"#{hint_id}")
        for source_type in SourceType:
            expect(hint).to_contain_text(f"{source_type.label} ({source_type.suffixes[0]})")
        expect(page.get_by_label("Type", exact=True).locator("option")).to_have_text(
            ["Any type", *labels]
        )

        page.get_by_label("Files", exact=True).set_input_files(
            [tmp_path / "handbook.docx", tmp_path / "notes.md"]
        )
        page.get_by_label("Collection", exact=True).first.fill("handbook")
        page.get_by_role("button", name="Upload").click()
        expect(page.get_by_role("status")).to_have_text(
            "The job ended: succeeded, 2 documents ingested, 0 failed.", timeout=60_000
        )
        section(page, "Documents").click()
        page.get_by_label("Type", exact=True).select_option(label="Word document")
        page.get_by_role("button", name="Apply").click()
        table = page.get_by_role("table", name="Documents")
        expect(table.get_by_role("row")).to_have_count(2)
        expect(table).to_contain_text("handbook.docx")
        expect(table).to_contain_text("Word document")
        # a column is as wide as its longest word: "handbook" is one line, never "handboo/k"
        collection = table.get_by_role("cell", name="handbook", exact=True).locator(".user-text")
        assert collection.evaluate("(el) => el.getClientRects().length") == 1
        checked(page, "documents-formats")

        page.get_by_role("link", name="Search").click()
        page.locator("summary", has_text="Filters").click()
        boxes = page.get_by_role("group", name="Source types").get_by_role("checkbox")
        expect(boxes).to_have_count(len(labels))
        page.get_by_label("Word document").check()
        page.get_by_label("Query").fill("tent")
        page.get_by_role("button", name="Search", exact=True).click()
        cards = page.locator(".cards > li")
        expect(cards.first).to_contain_text("Field Handbook")
        for n in range(cards.count()):
            expect(cards.nth(n)).not_to_contain_text("Notes")
