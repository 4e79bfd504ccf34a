"""Every method of the async client, round-tripped against the live service."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from rag_client import AsyncRagClient, NewDocument, NotFound

from tests.client.conftest import ADMIN_SCOPES, LiveService

RIVER = "# Rivers\n\nA river carries water and silt from the mountains down to the sea.\n"


async def test_documents_search_and_context(live: LiveService, tmp_path: Path) -> None:
    async with AsyncRagClient(live.url, live.token(live.tenant())) as rag:
        river = await rag.ingest(RIVER, title="Rivers", source_type="markdown", external_id="r")
        batch = await rag.ingest_batch([NewDocument(content="Bread is baked in ovens.")])
        assert batch.succeeded == 1
        path = tmp_path / "lakes.txt"
        path.write_text("Lakes hold still fresh water between hills.")
        uploaded = await rag.upload(path)
        assert uploaded.external_id == "lakes.txt"  # the file name, as the console names it

        page = await rag.list_documents(limit=2)
        assert (page.total, len(page.items)) == (3, 2)
        walked = [document.document_id async for document in rag.iter_documents(page_size=2)]
        assert len(set(walked)) == 3
        assert (await rag.get_document(river.document_id)).external_id == "r"

        found = await rag.search("river water to the sea", max_results=1)
        assert found.chunks[0].document_id == river.document_id
        built = await rag.context("river water to the sea", max_results=1)
        assert built.citations[0].title == "Rivers"

        await rag.delete_document(river.document_id)
        with pytest.raises(NotFound):
            await rag.get_document(river.document_id)


async def test_admin_methods(live: LiveService) -> None:
    admin_tenant = live.tenant(prefix="admin")
    async with AsyncRagClient(live.url, live.token(admin_tenant, ADMIN_SCOPES)) as admin:
        new_id = f"c-{uuid.uuid4().hex[:10]}"
        assert (await admin.create_tenant(new_id, tier="pro")).tier == "pro"
        assert (await admin.update_tenant(new_id, tier="basic")).tier == "basic"
        assert (await admin.suspend_tenant(new_id)).status == "suspended"
        assert (await admin.activate_tenant(new_id)).status == "active"
        listed = [tenant.id async for tenant in admin.iter_tenants(page_size=3)]
        assert new_id in listed
        assert len(listed) == len(set(listed))
        assert (await admin.list_tenants(limit=1)).items
        assert (await admin.tenant_stats(new_id)).documents == 0
