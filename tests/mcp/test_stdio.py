"""`rag mcp --tenant T`: the same tools over stdio, started as a desktop host starts it (a
subprocess, driven by the SDK's client). The subprocess sees committed rows only, so this
test commits a tenant of its own and deletes it at the end."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlparse

import asyncpg
import pytest
from mcp import Client, StdioServerParameters

from app.db.embedded import with_database
from app.db.engine import create_sessionmaker
from app.db.tenancy import SessionMaker, registry_transaction
from app.embeddings.local import LocalEmbedder
from app.errors import Forbidden
from app.ingest.documents import ingest_documents
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from app.ingest.versions import IngestResult
from app.mcp.stdio import serve_stdio
from app.settings import Settings
from app.tenants import create_tenant
from tests.conftest import DatabaseUrls, small_chunker
from tests.mcp.conftest import read_json, sdk_structured

pytestmark = pytest.mark.slow
RAG = [sys.executable, "-m", "app.cli.main"]
DOCUMENTS = {
    "Espresso": "Espresso is brewed by forcing hot water through finely ground coffee.",
    "Sourdough": "Sourdough bread rises with wild yeast and lactic acid bacteria.",
}


@pytest.fixture
async def committed_tenant(
    database: DatabaseUrls, app_engine: object, minilm: LocalEmbedder
) -> AsyncIterator[str]:
    """A tenant with two documents embedded by the local model, committed; removed after."""
    sessions: SessionMaker = create_sessionmaker(app_engine)  # type: ignore[arg-type]
    tenant_id = f"stdio-{uuid.uuid4().hex[:10]}"
    async with registry_transaction(sessions) as session:
        await create_tenant(session, tenant_id)
    documents = [
        DocumentInput(content=text, source_type=SourceType.TEXT, title=title)
        for title, text in DOCUMENTS.items()
    ]
    outcomes = await ingest_documents(
        sessions, minilm, chunker=small_chunker(), tenant_id=tenant_id, documents=documents
    )
    assert all(isinstance(outcome, IngestResult) for outcome in outcomes), outcomes
    try:
        yield tenant_id
    finally:
        name = urlparse(database.app_url).path.lstrip("/")
        owner_of_all = with_database(database.superuser_url, name).replace("+asyncpg", "")
        conn = await asyncpg.connect(owner_of_all)  # a superuser: past row-level security
        try:
            for table in ("chunks", "documents", "collections"):
                await conn.execute(f"DELETE FROM {table} WHERE tenant_id = $1", tenant_id)
            await conn.execute("DELETE FROM tenants WHERE id = $1", tenant_id)
        finally:
            await conn.close()


def environment(database: DatabaseUrls, tmp_path: Path) -> dict[str, str]:
    return {
        "RAG_DATABASE_URL": database.app_url,
        "RAG_EMBEDDING_PROVIDER": "local",
        "RAG_DATA_DIR": str(tmp_path),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }


async def test_rag_mcp_serves_the_tools_over_stdio(
    committed_tenant: str, database: DatabaseUrls, tmp_path: Path
) -> None:
    command = RAG[0]
    params = StdioServerParameters(
        command=command,
        args=[*RAG[1:], "mcp", "--tenant", committed_tenant],
        env=environment(database, tmp_path),
    )
    async with Client(params) as client:
        tools = {tool.name for tool in (await client.list_tools()).tools}
        assert tools == {
            "search_similar",
            "semantic_search",
            "search",
            "fetch",
            "get_context",
            "find_similar",
            "find_duplicates",
        }
        reply = sdk_structured(
            await client.call_tool("search_similar", {"query": "how is espresso made"})
        )
        assert reply["documents"][0]["source_file"] == "Espresso"
        assert reply["documents"][0]["content"] == DOCUMENTS["Espresso"]
        strict = sdk_structured(
            await client.call_tool("semantic_search", {"query": "how is espresso made"})
        )
        assert all(d["similarity"] >= 0.7 for d in strict["documents"])
        listing = await read_json(client, "rag://collections")
        assert listing["collections"][0]["documents"] == 2
        missing = await client.call_tool("fetch", {"id": str(uuid.uuid4())})
        assert missing.is_error


async def test_stdio_refuses_an_unknown_tenant_before_loading_the_model(
    settings: Settings,
) -> None:
    """What `rag mcp` reports (exit status 2, the detail on stderr) before reading stdin."""
    with pytest.raises(Forbidden, match="tenant 'nobody-here' does not exist"):
        await serve_stdio(settings, "nobody-here")
