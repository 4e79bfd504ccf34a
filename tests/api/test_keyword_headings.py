"""A word that appears only in a document's title or in a section heading is found by keyword
search, as the embedded text has it; the BM25 statistics stay exact through update and delete."""

from __future__ import annotations

import pytest

from app.db import bm25 as bm25_stats
from app.db.tenancy import SessionMaker
from tests.api.calls import DOCUMENTS, ingest, ingested, search
from tests.conftest import TenantClient

pytestmark = pytest.mark.on_citus

HANDBOOK = """# Pump maintenance

The impeller turns at a fixed speed and the housing stays sealed.

## Quorvozirux procedures

Drain the housing before any inspection and close both valves.
"""


async def keyword_titles(tenant: TenantClient, word: str) -> set[str]:
    """The titles of the documents whose chunks a keyword search finds."""
    chunks = await search(tenant, word, mode="keyword", max_results=20)
    return {chunk["title"] for chunk in chunks}


async def assert_exact(sessions: SessionMaker, tenant_id: str) -> bm25_stats.Bm25Check:
    check = await bm25_stats.verify(sessions, tenant_id)
    assert check.ok, check
    return check


async def test_title_and_heading_words_are_found_by_keyword_search(
    tenant_a: TenantClient, sessions: SessionMaker
) -> None:
    reply = await ingested(
        tenant_a,
        content=HANDBOOK,
        source_type="markdown",
        title="Zelvanthor field handbook",
        external_id="handbook",
    )
    other = await ingested(
        tenant_a,
        content="The impeller of the spare unit is kept dry.",
        title="Spare parts",
        external_id="spares",
    )
    # in no chunk's content: only in the title, or only in a heading
    contents = [c["content"].lower() for c in await search(tenant_a, "impeller", mode="keyword")]
    assert contents
    assert not any("zelvanthor" in c or "quorvozirux" in c for c in contents)
    assert await keyword_titles(tenant_a, "zelvanthor") == {"Zelvanthor field handbook"}
    under_heading = await search(tenant_a, "quorvozirux", mode="keyword")
    assert [c["content"] for c in under_heading] == [
        "Drain the housing before any inspection and close both valves."
    ]
    assert under_heading[0]["section"][-1] == "Quorvozirux procedures"
    first = await assert_exact(sessions, tenant_a.tenant_id)
    assert first.chunks == reply["chunks"] + other["chunks"]

    # a new version under another title: the old title's word goes, the new one's comes
    response = await ingest(
        tenant_a,
        content=HANDBOOK.replace("Quorvozirux", "Brastelmoor"),
        source_type="markdown",
        title="Yarrowind field handbook",
        external_id="handbook",
    )
    assert response.json()["changed"], response.text
    assert await keyword_titles(tenant_a, "zelvanthor") == set()
    assert await search(tenant_a, "quorvozirux", mode="keyword") == []
    assert await keyword_titles(tenant_a, "brastelmoor") == {"Yarrowind field handbook"}
    await assert_exact(sessions, tenant_a.tenant_id)

    deleted = await tenant_a.http.delete(
        f"{DOCUMENTS}/{reply['document_id']}", headers=tenant_a.headers
    )
    assert deleted.status_code in (200, 204), deleted.text
    assert await keyword_titles(tenant_a, "yarrowind") == set()
    after = await assert_exact(sessions, tenant_a.tenant_id)
    assert after.chunks == other["chunks"]
    assert await keyword_titles(tenant_a, "spare") == {"Spare parts"}
