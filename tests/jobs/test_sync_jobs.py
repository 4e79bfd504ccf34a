"""A collection sync run as a background job (`"background": true`): the full entries ingested
turn by turn, then the deletions, the receipt and the outcome when the job ends; its guard
checked at submission and again at the end; a cancelled one deletes nothing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from httpx import Response

from app.db.tenancy import SessionMaker, tenant_transaction
from app.jobs.deliveries import payload
from app.jobs.store import get_job_of
from app.settings import Settings
from tests.api.calls import assert_problem, listing
from tests.conftest import TenantClient, token_for
from tests.fakes import WordHashEmbedder
from tests.jobs.conftest import finished, job_state, wait_for, workers

pytestmark = pytest.mark.on_citus

SYNC = "/api/rag/collections/help/sync"
Json = dict[str, Any]


def page(external_id: str, text: str, **fields: Any) -> Json:
    return {"external_id": external_id, "content": text, **fields}


async def sync(tenant: TenantClient, documents: list[Json], **body: Any) -> Response:
    return await tenant.http.post(
        SYNC, json={"documents": documents, **body}, headers=tenant.headers
    )


async def stored(tenant: TenantClient) -> dict[str, Json]:
    found = await listing(tenant, collection="help", limit=200)
    return {item["external_id"]: item for item in found["items"]}


async def seeded(tenant: TenantClient) -> None:
    reply = await sync(
        tenant,
        [
            page("backups.md", "Backups are kept for 30 days.", version="v1"),
            page("login.md", "Sign in with your badge.", version="a1"),
            page("printers.md", "Printers need the quokkaspool driver.", version="p1"),
        ],
    )
    assert reply.status_code == 200, reply.text


async def test_a_background_sync_ends_with_its_deletions_receipt_and_outcome(
    owner_a: TenantClient, settings: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> None:
    await seeded(owner_a)
    reply = await sync(
        owner_a,
        [
            page("backups.md", "Backups are kept for 45 days.", version="v2"),
            {"external_id": "login.md", "version": "a1"},
            {"external_id": "faq.md", "version": "f1"},  # never sent: missing
            page("new.md", "Quokkas answer the phone on Mondays.", version="n1"),
        ],
        background=True,
    )
    assert reply.status_code == 202, reply.text
    accepted = reply.json()
    assert (accepted["documents"], accepted["references"]) == (2, 2)
    assert reply.headers["location"] == accepted["location"]
    queued = await job_state(owner_a, accepted["job_id"])
    assert queued["sync"] == {"collection": "help", "outcome": None, "receipt_id": None}
    assert sorted(await stored(owner_a)) == ["backups.md", "login.md", "printers.md"]

    async with workers(settings, committed, embedder):
        state = await finished(owner_a, accepted["job_id"])
    assert state["status"] == "succeeded", state
    assert state["progress"]["documents_done"] == 2
    outcome = state["sync"]["outcome"]
    assert outcome == {
        "added": ["new.md"],
        "updated": ["backups.md"],
        "unchanged": ["login.md"],
        "deleted": ["printers.md"],
        "missing": ["faq.md"],
        "failed": [],
    }
    now = await stored(owner_a)
    assert sorted(now) == ["backups.md", "login.md", "new.md"]
    assert now["backups.md"]["version"] == "v2"

    receipt_id = state["sync"]["receipt_id"]
    receipt = await owner_a.http.get(f"/api/rag/receipts/{receipt_id}", headers=owner_a.headers)
    assert receipt.status_code == 200, receipt.text
    body = receipt.json()
    assert (body["kind"], body["collection"]) == ("sync", "help")
    assert [d["external_id"] for d in body["deleted"]] == ["printers.md"]
    assert [d["external_id"] for d in body["added"]] == ["new.md"]
    assert body["erased"]["gone"] is True

    async with tenant_transaction(committed, owner_a.tenant_id) as session:
        job = await get_job_of(
            session, tenant_id=owner_a.tenant_id, job_id=uuid.UUID(accepted["job_id"])
        )
    assert job is not None
    said = payload(job)["data"]["sync"]  # what its callback says
    assert said["receipt_id"] == receipt_id
    assert said["counts"] == {
        "added": 1,
        "updated": 1,
        "unchanged": 1,
        "deleted": 1,
        "missing": 1,
        "failed": 0,
    }


async def test_its_guard_is_checked_at_submission_and_nothing_is_queued(
    owner_a: TenantClient,
) -> None:
    await seeded(owner_a)
    refused = await sync(owner_a, [page("new.md", "Hi.")], background=True, max_deletions=1)
    problem = assert_problem(refused, 409)
    assert "would delete 3 of 3 documents" in problem["detail"]
    jobs = await owner_a.http.get("/api/rag/jobs", headers=owner_a.headers)
    assert jobs.json()["total"] == 0


async def test_the_guard_checked_again_at_the_end_refuses_the_deletions(
    owner_a: TenantClient, settings: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> None:
    await seeded(owner_a)
    reply = await sync(
        owner_a,
        [page("backups.md", "Backups are kept for 60 days.", version="v3")]
        + [
            {"external_id": e, "version": v} for e, v in (("login.md", "a1"), ("printers.md", "p1"))
        ],
        background=True,
        max_deletions=0,
    )
    assert reply.status_code == 202, reply.text
    more = [page(f"extra{i}.md", f"Extra page {i}.") for i in range(2)]
    for extra in more:  # meanwhile, two more documents the sync does not name
        added = await owner_a.http.post(
            "/api/rag/documents", json={**extra, "collection": "help"}, headers=owner_a.headers
        )
        assert added.status_code == 201, added.text
    async with workers(settings, committed, embedder):
        state = await finished(owner_a, reply.json()["job_id"])
    assert state["status"] == "failed"
    assert "would delete 2 of 5 documents" in state["error"]
    assert "nothing was deleted" in state["error"]
    assert state["sync"]["receipt_id"] is None
    now = await stored(owner_a)
    assert len(now) == 5  # written, nothing deleted
    assert now["backups.md"]["version"] == "v3"


async def test_a_cancelled_sync_job_deletes_nothing(
    owner_a: TenantClient, settings: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> None:
    await seeded(owner_a)
    reply = await sync(owner_a, [page("new.md", "A new page.")], background=True)
    job_id = reply.json()["job_id"]
    cancelled = await owner_a.http.delete(f"/api/rag/jobs/{job_id}", headers=owner_a.headers)
    assert cancelled.status_code == 202, cancelled.text
    async with workers(settings, committed, embedder):
        state = await finished(owner_a, job_id)
    assert state["status"] == "cancelled"
    assert state["sync"]["outcome"] is None
    assert sorted(await stored(owner_a)) == ["backups.md", "login.md", "printers.md"]


@pytest.mark.parametrize(
    ("body", "said"),
    [
        ({"dry_run": True, "background": True}, "a dry run answers at once"),
        ({"callback_url": "https://example.com/hook"}, "only a sync run in the background"),
    ],
)
async def test_what_a_background_sync_refuses(owner_a: TenantClient, body: Json, said: str) -> None:
    await seeded(owner_a)
    problem = assert_problem(await sync(owner_a, [page("new.md", "Hi.")], **body), 422)
    assert said in problem["detail"]
    assert sorted(await stored(owner_a)) == ["backups.md", "login.md", "printers.md"]


async def test_a_suspended_tenants_sync_job_stops_and_deletes_nothing(
    owner_a: TenantClient,
    owner_b: TenantClient,
    settings: Settings,
    committed: SessionMaker,
    embedder: WordHashEmbedder,
) -> None:
    await seeded(owner_a)
    reply = await sync(owner_a, [page("new.md", "A new page.")], background=True)
    assert reply.status_code == 202, reply.text
    admin = {"Authorization": f"Bearer {token_for(settings, owner_b.tenant_id, 'rag:admin')}"}
    url = f"/api/admin/tenants/{owner_a.tenant_id}"
    assert (await owner_a.http.post(f"{url}/suspend", headers=admin)).status_code == 200
    async with workers(settings, committed, embedder):
        await wait_for(lambda: _ended(committed, owner_a.tenant_id, reply.json()["job_id"]))
    refused = await sync(owner_a, [page("new.md", "A new page.")], background=True)
    assert_problem(refused, 403)  # refused like any write
    assert (await owner_a.http.post(f"{url}/activate", headers=admin)).status_code == 200
    state = await job_state(owner_a, reply.json()["job_id"])
    assert state["status"] == "cancelled"
    assert state["error"] == "stopped: the tenant was suspended"
    assert state["sync"]["outcome"] is None
    assert sorted(await stored(owner_a)) == ["backups.md", "login.md", "printers.md"]


async def _ended(sessions: SessionMaker, tenant_id: str, job_id: str) -> Json | None:
    async with tenant_transaction(sessions, tenant_id) as session:
        job = await get_job_of(session, tenant_id=tenant_id, job_id=uuid.UUID(job_id))
    assert job is not None
    return None if job.status in ("queued", "running") else {"status": job.status}
