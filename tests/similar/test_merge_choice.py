"""A merge a person can trust: the preview shows what differs between the copies, a merge that
names no strategy never deletes a copy that differs, and keep_latest_version keeps the source's
latest revision. The scenario is the tutorial's: the current backups page ingested first, an
outdated copy (14 days instead of 30) after."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.db.tenancy import SessionMaker
from tests.conftest import TenantClient
from tests.similar.corpus import dedupe, document_ids, set_times

pytestmark = pytest.mark.on_citus

TUTORIAL = Path(__file__).parents[2] / "examples" / "tutorial"
CURRENT = (TUTORIAL / "handbook" / "backups.md").read_text()
OUTDATED = (TUTORIAL / "backups-old.md").read_text()


async def ingest(tenant: TenantClient, external_id: str, content: str, **extra: object) -> str:
    body: dict[str, object] = {"external_id": external_id, "title": "Backups", "content": content}
    body.update(extra)
    body.setdefault("source_type", "markdown")
    response = await tenant.http.post("/api/rag/documents", json=body, headers=tenant.headers)
    assert response.status_code == 201, response.text
    document_id: str = response.json()["document_id"]
    return document_id


async def test_the_tutorials_merge_without_a_choice_keeps_the_current_page(
    tenant: TenantClient, sessions: SessionMaker
) -> None:
    current = await ingest(tenant, "backups.md", CURRENT)
    outdated = await ingest(tenant, "backups-old.md", OUTDATED)
    ids = {"current": current, "outdated": outdated}
    await set_times(sessions, tenant.tenant_id, ids, ["current", "outdated"])
    preview = await dedupe(tenant)
    [group] = preview["duplicate_groups"]
    # what differs, word for word: the retention the merge would lose or keep
    [difference] = group["differences"]
    assert {difference["document_id"], difference["compared_with"]} == {current, outdated}
    assert difference["identical"] is False
    [passage] = difference["passages"]
    by_side = {
        difference["compared_with"]: (passage["primary"], passage["primary_changed"]),
        difference["document_id"]: (passage["duplicate"], passage["duplicate_changed"]),
    }
    assert by_side[current][1] == "30"
    assert by_side[outdated][1] == "14"
    assert "kept for 30 days" in by_side[current][0]
    assert len(passage["primary"]) < 200  # the passage, not the page
    assert "the copies' texts differ: read the differences before choosing" in group["notes"]
    assert preview["strategies"]["keep_newest"].startswith("last ingested")

    # no strategy named: refused, nothing deleted
    refused = await tenant.http.post(
        "/api/rag/dedupe", json={"dry_run": False}, headers=tenant.headers
    )
    assert refused.status_code == 422, refused.text
    assert "merge_strategy" in {e["field"] for e in refused.json()["errors"]}
    assert "the copies differ in 1 of 1 groups" in refused.json()["detail"]
    assert await document_ids(tenant) == {current, outdated}

    merged = await dedupe(tenant, dry_run=False, merge_strategy="keep_oldest")
    assert merged["removed_ids"] == [outdated]
    assert merged["merge_strategy"] == "keep_oldest"
    assert await document_ids(tenant) == {current}


async def test_identical_copies_merge_without_a_choice(
    tenant: TenantClient, sessions: SessionMaker
) -> None:
    first = await ingest(tenant, "backups.md", CURRENT)
    second = await ingest(tenant, "backups-copy.md", CURRENT)
    await set_times(sessions, tenant.tenant_id, {"1": first, "2": second}, ["1", "2"])
    preview = await dedupe(tenant)
    [group] = preview["duplicate_groups"]
    assert [d["identical"] for d in group["differences"]] == [True]
    assert group["differences"][0]["passages"] == []
    merged = await dedupe(tenant, dry_run=False)
    assert merged["removed_ids"] == [first]  # the last ingested is kept
    assert await document_ids(tenant) == {second}


@pytest.mark.parametrize(
    ("current_version", "outdated_version", "kind"),
    [
        ("2026-11-20T09:00:00Z", "2025-03-01T00:00:00+00:00", "iso_time"),
        ("2026-11-20", "2026-11-19T23:00:00", "iso_time"),
        ("12", "9", "number"),  # as numbers: "9" < "12", unlike as strings
    ],
)
async def test_keep_latest_version_keeps_the_sources_latest_revision(
    tenant: TenantClient,
    sessions: SessionMaker,
    current_version: str,
    outdated_version: str,
    kind: str,
) -> None:
    current = await ingest(tenant, "backups.md", CURRENT, version=current_version)
    outdated = await ingest(tenant, "backups-old.md", OUTDATED, version=outdated_version)
    ids = {"current": current, "outdated": outdated}
    await set_times(sessions, tenant.tenant_id, ids, ["current", "outdated"])
    preview = await dedupe(tenant, merge_strategy="keep_latest_version")
    [group] = preview["duplicate_groups"]
    assert group["versions_compared"] == kind
    assert group["primary_id"] == current
    assert group["kept_by_strategy"]["keep_latest_version"] == current
    assert group["kept_by_strategy"]["keep_newest"] == outdated
    assert {d["id"]: d["version"] for d in group["documents"]} == {
        current: current_version,
        outdated: outdated_version,
    }
    merged = await dedupe(tenant, dry_run=False, merge_strategy="keep_latest_version")
    assert merged["removed_ids"] == [outdated]
    assert await document_ids(tenant) == {current}


async def test_versions_that_do_not_compare_fall_back_to_the_last_ingested_and_say_so(
    tenant: TenantClient, sessions: SessionMaker
) -> None:
    current = await ingest(tenant, "backups.md", CURRENT, version="sha256:4f1c")
    outdated = await ingest(tenant, "backups-old.md", OUTDATED, version="2025-03-01T00:00:00Z")
    ids = {"current": current, "outdated": outdated}
    await set_times(sessions, tenant.tenant_id, ids, ["current", "outdated"])
    preview = await dedupe(tenant, merge_strategy="keep_latest_version")
    [group] = preview["duplicate_groups"]
    assert group["versions_compared"] is None
    assert group["primary_id"] == outdated
    assert (
        "keep_latest_version cannot compare versions here (default/backups.md has version "
        "'sha256:4f1c', neither an ISO 8601 time nor a number): it keeps the last ingested "
        "instead"
    ) in group["notes"]
