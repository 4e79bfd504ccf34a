"""GET /api/rag/formats: every format the parsers read, as the registry names it."""

from __future__ import annotations

from httpx import AsyncClient

from app.ingest.parsing import SourceType
from tests.conftest import TenantClient

FORMATS = "/api/rag/formats"


async def test_every_ingestible_format_is_listed_with_its_name_and_endings(
    tenant_a: TenantClient,
) -> None:
    reply = await tenant_a.http.get(FORMATS, headers=tenant_a.headers)
    assert reply.status_code == 200, reply.text
    items = reply.json()["items"]
    assert [item["source_type"] for item in items] == [t.value for t in SourceType]
    by_type = {item["source_type"]: item for item in items}
    assert by_type["docx"] == {
        "source_type": "docx",
        "label": "Word document",
        "suffixes": [".docx"],
        "file_only": True,
    }
    assert by_type["markdown"]["suffixes"][0] == ".md"
    assert by_type["markdown"]["file_only"] is False
    assert all(item["label"] and item["suffixes"] for item in items)


async def test_the_formats_need_a_token(client: AsyncClient) -> None:
    assert (await client.get(FORMATS)).status_code == 401
