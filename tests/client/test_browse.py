"""Browsing through the client, as the web console does over HTTP: who the token is, the
collections, a document's chunks with citations, the list by source type, the tiers."""

from __future__ import annotations

import asyncio

from rag_client import AsyncRagClient, RagClient, SourceType

from tests.client.conftest import ADMIN_SCOPES, LiveService

GUIDE = "# Guide\n\n## Backups\n\nBackups run nightly.\n\n## Restores\n\nRestores are tested."


def test_a_client_browses_what_the_console_shows(live: LiveService) -> None:
    tenant = live.tenant(prefix="browse")
    with RagClient(live.url, live.token(tenant)) as rag:
        me = rag.whoami()
        assert (me.tenant_id, sorted(me.scopes)) == (tenant, ["rag:ingest", "rag:search"])
        assert me.expires_at is not None
        created = rag.ingest(GUIDE, title="Guide", source_type="markdown", collection="ops")
        rag.ingest("Plain words.", title="Plain", collection="misc")
        assert [(c.name, c.documents) for c in rag.collections().items] == [
            ("misc", 1),
            ("ops", 1),
        ]
        page = rag.list_documents(source_type=SourceType.MARKDOWN)
        assert [d.title for d in page.items] == ["Guide"]
        chunks = rag.document_chunks(created.document_id, style="compact", limit=1, offset=1)
        assert (chunks.total, chunks.offset, len(chunks.chunks)) == (created.chunks, 1, 1)
        assert chunks.chunks[0].chunk_index == 1
        assert chunks.chunks[0].citation == "[Guide]"
        assert chunks.document.title == "Guide"


def test_the_async_client_reads_the_same(live: LiveService) -> None:
    tenant = live.tenant(prefix="browse-async")
    admin_tenant = live.tenant(prefix="browse-admin")

    async def browse() -> tuple[str, list[str]]:
        async with AsyncRagClient(live.url, live.token(tenant)) as rag:
            me = await rag.whoami()
        async with AsyncRagClient(live.url, live.token(admin_tenant, ADMIN_SCOPES)) as admin:
            tiers = await admin.tiers()
        return me.tenant_id, [t.name for t in tiers.items]

    tenant_id, tiers = asyncio.run(browse())
    assert tenant_id == tenant
    assert {"basic", "pro", "enterprise"} <= set(tiers)
