"""Jobs over HTTP: submit, progress, results, cancel, limits, isolation."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from httpx import AsyncClient

from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.conftest import TenantClient, app_client, new_tenant, token_for
from tests.fakes import WordHashEmbedder
from tests.jobs.conftest import finished, job_state, wait_for, workers

pytestmark = pytest.mark.on_citus

PARAGRAPH = "Lighthouses guide ships past the rocks at night with a rotating lamp. "


def files(count: int, *, words: str = "lighthouse") -> list[tuple[str, tuple[str, bytes, str]]]:
    """Files named after their words (a file's name is its external id in a job)."""
    return [
        (
            "files",
            (f"{words}{i}.md", f"# {words} {i}\n\n{PARAGRAPH * 20}".encode(), "text/markdown"),
        )
        for i in range(count)
    ]


async def submit(tenant: TenantClient, **kwargs: Any) -> str:
    reply = await tenant.http.post("/api/rag/jobs", headers=tenant.headers, **kwargs)
    assert reply.status_code == 202, reply.text
    assert reply.headers["location"] == f"/api/rag/jobs/{reply.json()['job_id']}"
    job_id: str = reply.json()["job_id"]
    return job_id


async def test_a_job_completes_and_its_documents_are_searchable(
    owner_a: TenantClient, settings: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> None:
    job_id = await submit(owner_a, files=files(3), data={"collection": "manuals"})
    queued = await job_state(owner_a, job_id)
    assert queued["status"] == "queued"
    names = ["lighthouse0.md", "lighthouse1.md", "lighthouse2.md"]
    # what the job is about, while it waits and once done: its files and collection
    assert (queued["files"], queued["collections"]) == (names, ["manuals"])
    async with workers(settings, committed, embedder):
        state = await finished(owner_a, job_id)
    assert state["status"] == "succeeded"
    assert (state["files"], state["collections"]) == (names, ["manuals"])
    listed = (await owner_a.http.get("/api/rag/jobs", headers=owner_a.headers)).json()
    [item] = [j for j in listed["items"] if j["job_id"] == job_id]
    assert (item["files"], item["collections"]) == (names, ["manuals"])
    progress = state["progress"]
    assert progress["documents_done"] == progress["documents_total"] == 3
    assert progress["chunks_done"] == sum(r["chunks"] for r in state["results"]) > 0
    assert [r["position"] for r in state["results"]] == [0, 1, 2]
    assert state["timings"]["finished_at"] is not None
    search = await owner_a.http.post(
        "/api/rag/search",
        headers=owner_a.headers,
        json={"query": "lighthouse rotating lamp", "collections": ["manuals"]},
    )
    assert search.status_code == 200
    found = {chunk["document_id"] for chunk in search.json()["chunks"]}
    assert found <= {r["document_id"] for r in state["results"]}
    assert found


async def test_json_documents_are_a_job_too(
    owner_a: TenantClient, settings: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> None:
    documents = [
        {"title": "Tides", "content": "Tides rise twice a day.", "external_id": "tides"},
        {"content": "# Moon\n\nThe moon pulls the sea.", "source_type": "markdown"},
    ]
    job_id = await submit(owner_a, json={"documents": documents})
    async with workers(settings, committed, embedder):
        state = await finished(owner_a, job_id)
    assert state["status"] == "succeeded"
    assert state["results"][0]["external_id"] == "tides"
    listed = await owner_a.http.get("/api/rag/documents", headers=owner_a.headers)
    assert listed.json()["total"] == 2


async def test_a_bad_file_fails_only_that_document(
    owner_a: TenantClient, settings: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> None:
    upload = [
        *files(1),
        ("files", ("broken.pdf", b"%PDF-1.7\nnot really a pdf", "application/pdf")),
        ("files", ("image.png", b"\x89PNG\r\n\x1a\n\x00\x00binary", "image/png")),
        *files(1, words="beacon"),
    ]
    job_id = await submit(owner_a, files=upload)
    async with workers(settings, committed, embedder):
        state = await finished(owner_a, job_id)
    assert state["status"] == "partial"
    statuses = [r["status"] for r in state["results"]]
    assert statuses == ["succeeded", "failed", "failed", "succeeded"]
    assert state["results"][2]["error_status"] == 415
    assert state["progress"]["documents_failed"] == 2
    listed = await owner_a.http.get("/api/rag/documents", headers=owner_a.headers)
    assert listed.json()["total"] == 2  # nothing of the bad files was kept


async def test_a_cancelled_queued_job_never_runs(
    owner_a: TenantClient, settings: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> None:
    job_id = await submit(owner_a, files=files(2))
    cancelled = await owner_a.http.delete(f"/api/rag/jobs/{job_id}", headers=owner_a.headers)
    assert cancelled.status_code == 202
    assert cancelled.json()["status"] == "cancelled"
    later = await submit(owner_a, files=files(1, words="later"))
    async with workers(settings, committed, embedder):
        await finished(owner_a, later)  # the queue has moved past the cancelled job
    state = await job_state(owner_a, job_id)
    assert state["status"] == "cancelled"
    assert state["results"] == []
    assert state["timings"]["started_at"] is None
    listed = await owner_a.http.get("/api/rag/documents", headers=owner_a.headers)
    assert listed.json()["total"] == 1


class GatedEmbedder(WordHashEmbedder):
    """Holds document embedding until released: a job caught mid-document."""

    def __init__(self) -> None:
        super().__init__(384)
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.entered.set()
        await self.release.wait()
        return await super().embed_documents(texts)


async def test_cancelling_a_running_job_stops_after_the_document_in_progress(
    owner_a: TenantClient, settings: Settings, committed: SessionMaker
) -> None:
    gated = GatedEmbedder()
    job_id = await submit(owner_a, files=files(4))
    async with workers(settings, committed, gated, turn_documents=10):
        await asyncio.wait_for(gated.entered.wait(), 120)
        reply = await owner_a.http.delete(f"/api/rag/jobs/{job_id}", headers=owner_a.headers)
        assert reply.json()["status"] == "running"
        assert reply.json()["cancel_requested"]
        gated.release.set()
        state = await finished(owner_a, job_id)
    assert state["status"] == "cancelled"
    assert [r["status"] for r in state["results"]] == ["succeeded"]  # whole, and alone
    listed = await owner_a.http.get("/api/rag/documents", headers=owner_a.headers)
    assert listed.json()["total"] == 1
    assert state["progress"]["bytes_pending"] == 0


async def test_suspending_a_tenant_stops_its_running_job_after_the_document_in_progress(
    owner_a: TenantClient, owner_b: TenantClient, settings: Settings, committed: SessionMaker
) -> None:
    """Its tokens get 403 at once; its job writes nothing more and ends cancelled, saying why,
    rather than ingesting the rest of its files and ending `succeeded`."""
    gated = GatedEmbedder()
    job_id = await submit(owner_a, files=files(6))
    admin = {"Authorization": f"Bearer {token_for(settings, owner_b.tenant_id, 'rag:admin')}"}
    tenant_path = f"/api/admin/tenants/{owner_a.tenant_id}"
    async with workers(settings, committed, gated, turn_documents=10):
        await asyncio.wait_for(gated.entered.wait(), 120)
        suspended = await owner_a.http.post(f"{tenant_path}/suspend", headers=admin)
        assert suspended.status_code == 200, suspended.text
        refused = await owner_a.http.get(f"/api/rag/jobs/{job_id}", headers=owner_a.headers)
        assert refused.status_code == 403
        gated.release.set()

        async def stopped() -> dict[str, Any] | None:
            stats = await owner_a.http.get(f"{tenant_path}/stats", headers=admin)
            jobs: dict[str, Any] = stats.json()["jobs"]
            return jobs if jobs["queued"] == jobs["running"] == 0 else None

        await wait_for(stopped)
    activated = await owner_a.http.post(f"{tenant_path}/activate", headers=admin)
    assert activated.status_code == 200, activated.text
    state = await job_state(owner_a, job_id)
    assert state["status"] == "cancelled"
    assert "suspended" in (state["error"] or "")
    assert [r["status"] for r in state["results"]] == ["succeeded"]  # whole, and alone
    listed = await owner_a.http.get("/api/rag/documents", headers=owner_a.headers)
    assert listed.json()["total"] == 1
    assert state["progress"]["bytes_pending"] == 0


async def test_another_tenant_cannot_see_poll_or_cancel_a_job(
    owner_a: TenantClient, owner_b: TenantClient
) -> None:
    job_id = await submit(owner_a, files=files(1))
    b = owner_b
    assert (await b.http.get(f"/api/rag/jobs/{job_id}", headers=b.headers)).status_code == 404
    assert (await b.http.delete(f"/api/rag/jobs/{job_id}", headers=b.headers)).status_code == 404
    listed = await b.http.get("/api/rag/jobs", headers=b.headers)
    assert listed.json()["total"] == 0
    queued = await b.http.get("/api/rag/jobs?status=queued", headers=b.headers)
    assert queued.json()["items"] == []
    state = await job_state(owner_a, job_id)
    assert state["status"] == "queued"
    assert not state["cancel_requested"]
    mine = await owner_a.http.get("/api/rag/jobs?status=queued", headers=owner_a.headers)
    assert [item["job_id"] for item in mine.json()["items"]] == [job_id]
    await owner_a.http.delete(f"/api/rag/jobs/{job_id}", headers=owner_a.headers)


async def test_limits_refuse_with_a_problem_and_change_nothing(
    settings: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> None:
    tight = settings.model_copy(update={"job_max_queued_jobs": 1, "job_max_queued_bytes": 4096})
    async with app_client(tight, committed, embedder) as http:
        tenant = await new_tenant(http, tight, committed)
        job_id = await submit(tenant, files=files(1))
        again = await http.post("/api/rag/jobs", headers=tenant.headers, files=files(1))
        assert again.status_code == 429
        assert again.headers["content-type"].startswith("application/problem+json")
        await http.delete(f"/api/rag/jobs/{job_id}", headers=tenant.headers)
        big = [("files", ("big.txt", b"word " * 1000, "text/plain"))]
        too_big = await http.post("/api/rag/jobs", headers=tenant.headers, files=big)
        assert too_big.status_code == 413
        assert too_big.json()["status"] == 413
        listed = await http.get("/api/rag/jobs", headers=tenant.headers)
        assert listed.json()["total"] == 1


async def test_bad_submissions_are_problems(
    jobs_client: AsyncClient, owner_a: TenantClient
) -> None:
    h = owner_a.headers
    cases = [
        await jobs_client.post("/api/rag/jobs", headers=h, json={"documents": []}),
        await jobs_client.post("/api/rag/jobs", headers=h, json={"documents": [{"x": 1}]}),
        await jobs_client.post("/api/rag/jobs", headers=h, data={"collection": "c"}, files=[]),
        await jobs_client.post(
            "/api/rag/jobs", headers=h, files=files(2), data={"external_id": "same"}
        ),
        await jobs_client.post("/api/rag/jobs", headers={**h, "content-type": "text/plain"}),
        await jobs_client.get("/api/rag/jobs/not-a-uuid", headers=h),
    ]
    assert [reply.status_code for reply in cases] == [422, 422, 415, 422, 415, 422]
    listed = await jobs_client.get("/api/rag/jobs", headers=h)
    assert listed.json()["total"] == 0


class OrderEmbedder(WordHashEmbedder):
    """Remembers, call by call, whether the texts embedded were the small job's ("beacon"):
    the order the worker served the jobs in, free of the polling client's timing."""

    def __init__(self) -> None:
        super().__init__(384)
        self.calls: list[bool] = []

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(any("beacon" in text for text in texts))
        return await super().embed_documents(texts)


async def test_a_small_job_is_not_starved_by_a_large_one(
    owner_a: TenantClient, owner_b: TenantClient, settings: Settings, committed: SessionMaker
) -> None:
    large = await submit(owner_a, files=files(12))
    small = await submit(owner_b, files=files(1, words="beacon"))
    order = OrderEmbedder()
    async with workers(settings, committed, order, turn_documents=2):
        done_small = await finished(owner_b, small)
        done_large = await finished(owner_a, large)
    assert done_small["status"] == done_large["status"] == "succeeded"
    assert len(order.calls) == 13  # one embedding call per document
    assert order.calls.index(True) <= 2  # after one turn of the large job (2 documents)
    assert done_small["timings"]["finished_at"] < done_large["timings"]["finished_at"]


async def test_admin_stats_show_the_tenants_active_jobs(
    owner_a: TenantClient, owner_b: TenantClient, settings: Settings
) -> None:
    job_id = await submit(owner_a, files=files(2))
    admin = {"Authorization": f"Bearer {token_for(settings, owner_a.tenant_id, 'rag:admin')}"}
    http = owner_a.http
    mine = await http.get(f"/api/admin/tenants/{owner_a.tenant_id}/stats", headers=admin)
    theirs = await http.get(f"/api/admin/tenants/{owner_b.tenant_id}/stats", headers=admin)
    assert mine.json()["jobs"]["queued"] == 1
    assert mine.json()["jobs"]["queued_bytes"] > 0
    assert theirs.json()["jobs"] == {"queued": 0, "running": 0, "queued_bytes": 0}
    await http.delete(f"/api/rag/jobs/{job_id}", headers=owner_a.headers)
    after = await http.get(f"/api/admin/tenants/{owner_a.tenant_id}/stats", headers=admin)
    assert after.json()["jobs"]["queued"] == 0


async def test_a_document_past_the_synchronous_bound_goes_through_as_a_job(
    settings: Settings, committed: SessionMaker, embedder: WordHashEmbedder
) -> None:
    bounded = settings.model_copy(update={"sync_ingest_max_chunks": 4})
    content = "\n\n".join([PARAGRAPH * 20] * 5)  # 5 chunks of ~290 tokens
    async with app_client(bounded, committed, embedder) as http:
        tenant = await new_tenant(http, bounded, committed, tier="enterprise")
        body = {"title": "Lamps", "content": content}
        refused = await http.post("/api/rag/documents", json=body, headers=tenant.headers)
        assert refused.status_code == 413
        assert "POST /api/rag/jobs" in refused.json()["detail"]
        job_id = await submit(tenant, json={"documents": [body]})
        async with workers(bounded, committed, embedder):
            state = await finished(tenant, job_id)
    assert state["status"] == "succeeded", state
    assert state["results"][0]["chunks"] > 4
