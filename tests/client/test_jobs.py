"""Background ingestion through the Python client: submit files or
documents, wait with a progress callback, list, cancel; sync and async alike."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from rag_client import (
    AsyncRagClient,
    Job,
    JobStatus,
    NewDocument,
    NotFound,
    ProblemError,
    RagClient,
)

from tests.client.conftest import WEBHOOK_SECRET, LiveService
from tests.webhooks.receiver import receiving


@pytest.fixture
def rag(live: LiveService) -> Iterator[RagClient]:
    with RagClient(live.url, live.token(live.tenant())) as client:
        yield client


def test_files_are_submitted_and_waited_for_with_progress(rag: RagClient, tmp_path: Path) -> None:
    path = tmp_path / "lighthouse.md"
    path.write_text("# Lighthouse\n\nThe keeper trims the lamp wick at dusk.\n")
    accepted = rag.submit(
        [path, ("guides/fog.md", b"# Fog\n\nThe foghorn sounds every thirty seconds.\n")],
        collection="coast",
        metadata={"team": "keepers"},
    )
    assert (accepted.status, accepted.documents) == (JobStatus.QUEUED, 2)
    seen: list[Job] = []
    done = rag.wait(accepted.job_id, progress=seen.append, poll_seconds=0.2, timeout_seconds=120)
    assert done.status is JobStatus.SUCCEEDED, done
    assert done.progress.documents_done == 2
    assert seen[-1] == done
    assert [s.status.final for s in seen].count(True) == 1  # the callback saw it end once
    listed = {d.external_id: d for d in rag.list_documents(collection="coast").items}
    assert set(listed) == {"lighthouse.md", "guides/fog.md"}
    [hit] = rag.search("foghorn", mode="keyword").chunks
    assert hit.external_id == "guides/fog.md"
    assert done.job_id in {job.job_id for job in rag.list_jobs(status="succeeded").items}
    # the same files again: known by their names, so updated in place (here: unchanged)
    again = rag.wait(rag.submit([path], collection="coast").job_id, timeout_seconds=120)
    assert again.status is JobStatus.SUCCEEDED
    assert rag.list_documents(collection="coast").total == 2


def test_documents_are_submitted_and_a_finished_job_cannot_be_undone(rag: RagClient) -> None:
    accepted = rag.submit(documents=[NewDocument(title="Tides", content="High tide at noon.")])
    done = rag.wait(accepted.job_id, poll_seconds=0.2, timeout_seconds=120)
    assert done.status is JobStatus.SUCCEEDED
    after = rag.cancel(accepted.job_id)
    assert after.status is JobStatus.SUCCEEDED  # nothing left to stop
    with pytest.raises(NotFound):
        rag.job("00000000-0000-0000-0000-000000000000")


def test_submit_takes_files_or_documents(rag: RagClient) -> None:
    with pytest.raises(ValueError, match="either files or documents"):
        rag.submit()
    with pytest.raises(ValueError, match="either files or documents"):
        rag.submit([("a.md", b"a")], documents=[NewDocument(content="b")])


async def test_the_async_client_waits_too(live: LiveService) -> None:
    async with AsyncRagClient(live.url, live.token(live.tenant())) as rag:
        accepted = await rag.submit([("notes.txt", b"Buoys mark the channel.")])
        done = await rag.wait(accepted.job_id, poll_seconds=0.2, timeout_seconds=120)
        assert done.status is JobStatus.SUCCEEDED
        assert (await rag.job(accepted.job_id)).progress.documents_done == 1


def test_a_job_calls_back_when_it_ends(rag: RagClient) -> None:
    with receiving(WEBHOOK_SECRET, [204]) as receiver:
        accepted = rag.submit(
            documents=[NewDocument(title="Tides", content="High tide at noon.")],
            callback_url=receiver.url,
        )
        files = rag.submit([("notes.txt", b"Buoys mark the channel.")], callback_url=receiver.url)
        for job_id in (accepted.job_id, files.job_id):
            rag.wait(job_id, poll_seconds=0.2, timeout_seconds=120)
            deadline = time.monotonic() + 60
            while (job := rag.job(job_id)).callback and job.callback.status != "delivered":
                assert time.monotonic() < deadline, job.callback
                time.sleep(0.2)
            assert job.callback is not None
            assert (job.callback.url, job.callback.attempts) == (receiver.url, 1)
    assert all(r.verified for r in receiver.received)
    sent = {r.headers["webhook-id"]: json.loads(r.body) for r in receiver.received}
    assert sent[str(accepted.job_id)]["type"] == "job.succeeded"
    assert set(sent) == {str(accepted.job_id), str(files.job_id)}
    with pytest.raises(ProblemError) as refused:
        rag.submit([("a.md", b"a")], callback_url="https://10.0.0.1/hook")
    assert refused.value.status == 422
    assert "callback_url" in refused.value.detail
