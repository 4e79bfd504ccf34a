"""Every door writes the same: the same files through the HTTP batch, the upload, a background
job and `rag ingest` (in process) give the same stored documents and chunks, and each tenant's
books count the same `ingests`. These tests commit (a job runs in other transactions): each
uses fresh tenants."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from httpx import AsyncClient
from rich.console import Console
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.cli.files import SourceFile, content_version
from app.cli.ingest import ingest_files
from app.db.engine import create_sessionmaker
from app.db.models import Chunk, Document
from app.db.tenancy import SessionMaker, tenant_transaction
from app.jobs.queue import background_workers
from app.main import job_services
from app.permissions import EVERY_DOCUMENT
from app.resources import Resources
from app.settings import Settings
from tests.conftest import TenantClient, new_tenant, resources_of, running_app, token_for
from tests.fakes import WordHashEmbedder
from tests.jobs.conftest import finished

pytestmark = pytest.mark.on_citus

COLLECTION = "handbook"
FILES = {
    "guide/backups.md": b"# Backups\n\nBackups are kept for 30 days.\n\n## Restores\n\n"
    b"Ask the on-call engineer; restores take an hour.",
    "notes.txt": b"Printers on floor two need the quokkaspool driver.",
    "intro.html": b"<html><head><title>Welcome</title></head><body><h1>Welcome</h1>"
    b"<p>Badges open every door after nine.</p></body></html>",
}
TYPES = {"guide/backups.md": "markdown", "notes.txt": "text", "intro.html": "html"}


@pytest.fixture
async def served(
    app_engine: AsyncEngine, settings: Settings, embedder: WordHashEmbedder
) -> AsyncIterator[tuple[AsyncClient, Resources, SessionMaker]]:
    committed = create_sessionmaker(app_engine)
    async with running_app(settings, committed, embedder) as app:
        from httpx import ASGITransport

        transport = ASGITransport(app=app)
        async with AsyncClient(transport=transport, base_url="http://test") as http:
            yield http, resources_of(app), committed


def fields(name: str) -> dict[str, Any]:
    """What `rag ingest` stores with a file: the others are told the same."""
    return {
        "external_id": name,
        "collection": COLLECTION,
        "metadata": {"filename": Path(name).name},
        "version": content_version(FILES[name]),
    }


async def through_batch(tenant: TenantClient) -> None:
    documents = [
        {"content": data.decode(), "source_type": TYPES[name], **fields(name)}
        for name, data in FILES.items()
    ]
    reply = await tenant.http.post(
        "/api/rag/documents/batch", json={"documents": documents}, headers=tenant.headers
    )
    assert reply.status_code == 200, reply.text


async def through_upload(tenant: TenantClient) -> None:
    for name, data in FILES.items():
        form = {**fields(name), "metadata": json.dumps(fields(name)["metadata"])}
        reply = await tenant.http.post(
            "/api/rag/documents/upload",
            files={"file": (Path(name).name, data)},
            data=form,
            headers=tenant.headers,
        )
        assert reply.status_code == 201, reply.text


async def through_jobs(tenant: TenantClient, resources: Resources, settings: Settings) -> None:
    job_ids = []
    for name, data in FILES.items():  # one file a job: a job's version is one file's
        form = {**fields(name), "metadata": json.dumps(fields(name)["metadata"])}
        reply = await tenant.http.post(
            "/api/rag/jobs",
            files={"files": (name, data)},
            data=form,
            headers=tenant.headers,
        )
        assert reply.status_code == 202, reply.text
        job_ids.append(reply.json()["job_id"])
    async with background_workers(settings, job_services(resources), concurrency=1):
        for job_id in job_ids:
            job = await finished(tenant, job_id)
            assert job["status"] == "succeeded", job


async def through_the_command_line(
    tenant: TenantClient, resources: Resources, tmp_path: Path
) -> None:
    files = []
    for name, data in FILES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        files.append(SourceFile(path, name, len(data)))
    summary = await ingest_files(
        resources.reading_as_caller(EVERY_DOCUMENT),
        files,
        tenant_id=tenant.tenant_id,
        collection=COLLECTION,
        console=Console(quiet=True),
    )
    assert not summary.failed, summary.failed


async def stored(sessions: SessionMaker, tenant_id: str) -> dict[str, Any]:
    """The tenant's documents and chunks, without what differs by nature (ids, times)."""
    async with tenant_transaction(sessions, tenant_id) as session:
        documents = (await session.scalars(select(Document).order_by(Document.external_id))).all()
        found = {}
        for document in documents:
            chunks = (
                await session.scalars(
                    select(Chunk)
                    .where(Chunk.document_id == document.id)
                    .order_by(Chunk.chunk_index)
                )
            ).all()
            found[document.external_id] = {
                "title": document.title,
                "source_type": document.source_type,
                "content_hash": document.content_hash,
                "version": document.version,
                "metadata": document.metadata_,
                "chunk_count": document.chunk_count,
                "chunks": [
                    (
                        c.content,
                        c.section_path,
                        c.page_number,
                        c.token_count,
                        c.embedded_text_hash,
                        c.search_vector,
                        c.heading_vector,
                        c.metadata_,
                    )
                    for c in chunks
                ],
            }
    return found


async def test_the_same_files_through_every_door_are_stored_and_counted_the_same(
    served: tuple[AsyncClient, Resources, SessionMaker], settings: Settings, tmp_path: Path
) -> None:
    http, resources, sessions = served
    doors = {}
    for door in ("batch", "upload", "jobs", "cli"):
        doors[door] = await new_tenant(http, settings, sessions, tier="enterprise")
    await through_batch(doors["batch"])
    await through_upload(doors["upload"])
    await through_jobs(doors["jobs"], resources, settings)
    await through_the_command_line(doors["cli"], resources, tmp_path)

    rows = {door: await stored(sessions, tenant.tenant_id) for door, tenant in doors.items()}
    assert sorted(rows["batch"]) == sorted(FILES)
    for door in ("upload", "jobs", "cli"):
        assert rows[door] == rows["batch"], door

    await resources.usage.flush(resources.sessions)
    for door, tenant in doors.items():
        admin = {"Authorization": f"Bearer {token_for(settings, tenant.tenant_id, 'rag:admin')}"}
        stats = await http.get(f"/api/admin/tenants/{tenant.tenant_id}/stats", headers=admin)
        assert stats.status_code == 200, stats.text
        assert stats.json()["traffic"]["last_hour"]["ingests"] == len(FILES), door
