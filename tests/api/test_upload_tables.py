"""POST /api/rag/documents/upload with a long table: a search for a row's value finds the chunk
holding the row under the table's header row; a table past what one request may embed is a
413 and leaves nothing stored."""

from __future__ import annotations

import pytest

from tests.api.calls import search, total
from tests.api.test_upload import upload, uploaded
from tests.conftest import TenantClient
from tests.ingest.tables import HEADER, fleet, table_file, vessel

HEADER_LINE = " | ".join(HEADER)


@pytest.mark.parametrize("kind", ["docx", "html", "pdf"])
async def test_a_search_for_a_rows_value_finds_it_under_the_header_row(
    tenant_a: TenantClient, kind: str
) -> None:
    rows = fleet(90)
    reply = await uploaded(tenant_a, *table_file(kind, rows))
    assert reply["chunks"] >= 4
    name, port, length, crew = rows[80]  # far past the first chunk
    [hit] = await search(tenant_a, name, mode="keyword", max_results=5)
    lines = hit["content"].split("\n")
    assert HEADER_LINE in lines
    assert f"{name} | {port} | {length} | {crew}" in lines


async def test_a_table_of_100000_rows_is_413_in_one_request_and_nothing_is_stored(
    tenant_a: TenantClient,
) -> None:
    rows = [[vessel(n), f"Port {n % 9}", str(n % 80), str(n % 31)] for n in range(100_000)]
    response = await upload(tenant_a, *table_file("markdown", rows))
    assert response.status_code == 413, response.text
    assert "chunks" in response.json()["detail"]
    assert await total(tenant_a) == 0
