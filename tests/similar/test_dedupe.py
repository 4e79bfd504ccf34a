"""POST /api/rag/dedupe: groups, threshold, dry run, merge strategies, re-check, isolation."""

from __future__ import annotations

import math
import uuid

import pytest

from app.db.tenancy import SessionMaker
from app.resources import Resources
from app.retrieval.dedupe import DedupeRequest, find_duplicates, merge_duplicates
from app.settings import Settings
from tests.conftest import TenantClient, new_tenant
from tests.similar.corpus import (
    MANUAL,
    OTHERS,
    PLANTED,
    dedupe,
    document_ids,
    ingest_all,
    set_times,
)

pytestmark = pytest.mark.on_citus

THRESHOLD = 0.85  # MiniLM: the planted copies are 0.86-0.98 apart, `related` 0.42


def groups_of(reply: dict[str, object], names: dict[str, str]) -> list[set[str]]:
    groups = reply["duplicate_groups"]
    assert isinstance(groups, list)
    return [{names[g["primary_id"]], *(names[i] for i in g["duplicate_ids"])} for g in groups]


async def test_planted_duplicates_form_one_group_and_nothing_else(tenant: TenantClient) -> None:
    ids = await ingest_all(tenant, {**PLANTED, **OTHERS})
    names = {v: k for k, v in ids.items()}
    reply = await dedupe(tenant, similarity_threshold=THRESHOLD)
    assert groups_of(reply, names) == [set(PLANTED)]
    assert reply["total_duplicates"] == 3
    assert reply["dry_run"] is True
    assert reply["action"] == "preview"
    assert reply["documents_examined"] == 7
    group = reply["duplicate_groups"][0]
    assert THRESHOLD <= group["avg_similarity"] <= 1.0
    assert group["primary_title"].startswith("Doc ")
    assert len(group["duplicate_titles"]) == 3
    # each document named as the caller knows it, to tell copies with one title apart
    assert {d["external_id"] for d in group["documents"]} == set(PLANTED)
    # The exact comparison agrees with the index; use_lsh is accepted as use_index's alias.
    exact = await dedupe(tenant, similarity_threshold=THRESHOLD, use_index=False)
    assert groups_of(exact, names) == [set(PLANTED)]
    alias = await dedupe(tenant, similarity_threshold=THRESHOLD, use_lsh=False)
    assert groups_of(alias, names) == [set(PLANTED)]
    deeper = await dedupe(tenant, similarity_threshold=THRESHOLD, ef_search=200)
    assert groups_of(deeper, names) == [set(PLANTED)]


async def test_default_threshold_finds_the_one_word_change_only(tenant: TenantClient) -> None:
    ids = await ingest_all(tenant, {**PLANTED, **OTHERS})
    names = {v: k for k, v in ids.items()}
    reply = await dedupe(tenant)  # 0.95
    assert groups_of(reply, names) == [{"manual", "one-word"}]


async def test_threshold_is_respected_at_the_boundary(tenant: TenantClient) -> None:
    ids = await ingest_all(tenant, {"manual": PLANTED["manual"], "footer": PLANTED["footer"]})
    names = {v: k for k, v in ids.items()}
    pair = (await dedupe(tenant, similarity_threshold=0.5))["duplicate_groups"][0]
    similarity = pair["avg_similarity"]  # one pair: its similarity, rounded to 6 places
    at = math.floor(similarity * 1e6) / 1e6 - 1e-6
    above = math.ceil(similarity * 1e6) / 1e6 + 1e-6
    assert groups_of(await dedupe(tenant, similarity_threshold=at), names) == [{"manual", "footer"}]
    assert (await dedupe(tenant, similarity_threshold=above))["duplicate_groups"] == []


async def test_a_preview_says_which_document_each_strategy_keeps(
    tenant: TenantClient, sessions: SessionMaker
) -> None:
    ids = await ingest_all(tenant, {**PLANTED, **OTHERS})
    await set_times(sessions, tenant.tenant_id, ids, ["footer", "manual", "one-word", "rechunked"])
    reply = await dedupe(tenant, similarity_threshold=THRESHOLD, merge_strategy="keep_oldest")
    [group] = reply["duplicate_groups"]
    kept = group["kept_by_strategy"]
    assert kept["keep_oldest"] == group["primary_id"] == ids["footer"]
    assert kept["keep_newest"] == ids["rechunked"]
    assert kept["keep_most_accessed"] in {ids[k] for k in PLANTED}


async def test_a_dry_run_changes_nothing(tenant: TenantClient) -> None:
    await ingest_all(tenant, {**PLANTED, **OTHERS})
    before = await document_ids(tenant)
    reply = await dedupe(tenant, similarity_threshold=THRESHOLD, dry_run=True)
    assert reply["removed_ids"] == []
    assert await document_ids(tenant) == before


@pytest.mark.parametrize(
    ("strategy", "kept"),
    [("keep_newest", "rechunked"), ("keep_oldest", "footer")],
)
async def test_merge_keeps_the_strategys_document_and_runs_once(
    tenant: TenantClient, sessions: SessionMaker, strategy: str, kept: str
) -> None:
    ids = await ingest_all(tenant, {**PLANTED, **OTHERS})
    await set_times(sessions, tenant.tenant_id, ids, ["footer", "manual", "one-word", "rechunked"])
    reply = await dedupe(
        tenant, similarity_threshold=THRESHOLD, dry_run=False, merge_strategy=strategy
    )
    assert reply["action"] == "merged"
    assert reply["dry_run"] is False
    assert reply["duplicate_groups"][0]["primary_id"] == ids[kept]
    assert reply["duplicate_groups"][0]["kept_by_strategy"][strategy] == ids[kept]
    removed = {ids[k] for k in PLANTED if k != kept}
    assert set(reply["removed_ids"]) == removed
    assert reply["total_duplicates"] == 3
    assert await document_ids(tenant) == set(ids.values()) - removed
    again = await dedupe(tenant, similarity_threshold=THRESHOLD, dry_run=False)
    assert again["removed_ids"] == []
    assert again["duplicate_groups"] == []
    assert await document_ids(tenant) == set(ids.values()) - removed


async def test_keep_most_accessed_counts_real_searches(
    tenant: TenantClient, sessions: SessionMaker, resources: Resources
) -> None:
    ids = await ingest_all(tenant, PLANTED)
    for _ in range(3):  # only `footer` mentions the intranet wiki export
        response = await tenant.http.post(
            "/api/rag/search",
            json={
                "query": "exported from the intranet wiki",
                "max_results": 1,
                "threshold": 0.1,
            },
            headers=tenant.headers,
        )
        assert response.status_code == 200, response.text
        assert response.json()["chunks"][0]["document_id"] == ids["footer"]
    assert await resources.returns.flush(sessions) >= 1
    shown = await tenant.http.get(f"/api/rag/documents/{ids['footer']}", headers=tenant.headers)
    assert shown.json()["access_count"] == 3
    untouched = await tenant.http.get(
        f"/api/rag/documents/{ids['rechunked']}", headers=tenant.headers
    )
    assert untouched.json()["access_count"] == 0
    reply = await dedupe(
        tenant, similarity_threshold=THRESHOLD, dry_run=False, merge_strategy="keep_most_accessed"
    )
    assert reply["duplicate_groups"][0]["primary_id"] == ids["footer"]
    assert await document_ids(tenant) == {ids["footer"]}


async def test_a_document_changed_after_the_preview_is_not_deleted(
    tenant: TenantClient, sessions: SessionMaker, resources: Resources
) -> None:
    ids = await ingest_all(tenant, PLANTED)
    request = DedupeRequest(similarity_threshold=THRESHOLD, dry_run=False)
    model = resources.embedder.model_id
    found = await find_duplicates(
        sessions, tenant_id=tenant.tenant_id, model_id=model, request=request
    )
    primary = found.groups[0].primary.id
    changed = next(k for k, v in ids.items() if uuid.UUID(v) != primary)
    # Rewritten meanwhile into something else entirely (same external id: an update).
    await ingest_all(tenant, {changed: "Completely different text about volcanoes and lava."})
    merged = await merge_duplicates(
        sessions, tenant_id=tenant.tenant_id, groups=found.groups, request=request, examined=4
    )
    assert uuid.UUID(ids[changed]) not in merged.removed
    assert len(merged.removed) == 2
    assert await document_ids(tenant) == {str(primary), ids[changed]}


async def test_another_tenant_is_never_compared_returned_or_deleted(
    tenant: TenantClient, other: TenantClient
) -> None:
    mine = await ingest_all(tenant, {"manual": MANUAL})  # alone: no duplicate in its tenant
    theirs = await ingest_all(other, PLANTED)
    preview = await dedupe(tenant, similarity_threshold=0.5)
    assert preview["duplicate_groups"] == []
    assert preview["documents_examined"] == 1
    merged = await dedupe(tenant, similarity_threshold=0.5, dry_run=False)
    assert merged["removed_ids"] == []
    assert await document_ids(other) == set(theirs.values())
    assert await document_ids(tenant) == set(mine.values())
    # The other tenant's own dedupe sees its own copies only.
    own = await dedupe(other, similarity_threshold=THRESHOLD)
    returned = {
        own["duplicate_groups"][0]["primary_id"],
        *own["duplicate_groups"][0]["duplicate_ids"],
    }
    assert returned == set(theirs.values())


async def test_a_merge_needs_the_ingest_scope(http_for_scopes: TenantClient) -> None:
    response = await http_for_scopes.http.post(
        "/api/rag/dedupe", json={"dry_run": False}, headers=http_for_scopes.headers
    )
    assert response.status_code == 403, response.text
    preview = await http_for_scopes.http.post(
        "/api/rag/dedupe", json={}, headers=http_for_scopes.headers
    )
    assert preview.status_code == 200, preview.text


@pytest.fixture
async def http_for_scopes(
    tenant: TenantClient, settings: Settings, sessions: SessionMaker
) -> TenantClient:
    return await new_tenant(tenant.http, settings, sessions, scopes="rag:search")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"similarity_threshold": 1.5}, "similarity_threshold"),
        ({"similarity_threshold": "high"}, "similarity_threshold"),
        ({"merge_strategy": "keep_best"}, "merge_strategy"),
        ({"limit": 0}, "limit"),
        ({"limit": 50_001}, "limit"),
        ({"dry_run": "perhaps"}, "dry_run"),
        ({"collections": [""]}, "collections.0"),
        ({"use_index": False, "limit": 10_000}, "use_index"),
        ({"ef_search": 0}, "ef_search"),
        ({"ef_search": 1001}, "ef_search"),
        ({"surprise": 1}, "surprise"),
    ],
)
async def test_bad_dedupe_bodies_are_422_naming_the_field_and_change_nothing(
    tenant: TenantClient, body: dict[str, object], field: str
) -> None:
    await ingest_all(tenant, PLANTED)
    before = await document_ids(tenant)
    response = await tenant.http.post(
        "/api/rag/dedupe",
        json={**body, "dry_run": False} if "dry_run" not in body else body,
        headers=tenant.headers,
    )
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    assert field in {error["field"] for error in response.json()["errors"]}
    assert await document_ids(tenant) == before
