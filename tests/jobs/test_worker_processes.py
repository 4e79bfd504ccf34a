"""`rag worker` processes: two share the queue, and one killed with SIGKILL mid-job is
replaced by another that finishes the job, with the same chunks as a synchronous ingest."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import text

from app.db.tenancy import SessionMaker, registry_transaction, tenant_transaction
from app.embeddings.local import LocalEmbedder
from app.settings import Settings
from tests.conftest import TenantClient, _Unclosable, app_client, new_tenant
from tests.jobs.conftest import finished, job_state, wait_for
from tests.jobs.test_jobs_api import PARAGRAPH, submit
from tests.processes import scratch_directory

pytestmark = [pytest.mark.slow, pytest.mark.on_citus]


def _worker_env(settings: Settings, data_dir: str) -> dict[str, str]:
    assert settings.database_url is not None
    return {
        **os.environ,
        "RAG_DATABASE_URL": settings.database_url.get_secret_value(),
        "RAG_DATA_DIR": data_dir,
        "RAG_EMBEDDING_PROVIDER": "local",
        "RAG_JOB_HEARTBEAT_SECONDS": "1",
        "RAG_JOB_STALLED_SECONDS": "4",
        "RAG_JOB_TURN_DOCUMENTS": "1",
        "HF_HUB_OFFLINE": "1",
    }


@contextmanager
def worker_processes(settings: Settings, count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    with scratch_directory("rag-worker-") as data_dir:
        started = [
            subprocess.Popen(
                [sys.executable, "-c", "from app.cli import main; main()", "worker"],
                env=_worker_env(settings, str(data_dir)),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            for _ in range(count)
        ]
        try:
            yield started
        finally:
            for process in started:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in started:
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


async def live_workers(sessions: SessionMaker) -> int:
    """Workers with a fresh heartbeat (procrastinate's registry; no tenant data in it)."""
    async with registry_transaction(sessions) as session:
        found = await session.scalar(
            text(
                "select count(*) from procrastinate_workers"
                " where last_heartbeat > now() - interval '3 seconds'"
            )
        )
    return int(found or 0)


async def wait_for_workers(sessions: SessionMaker, count: int) -> None:
    async def ready() -> dict[str, Any] | None:
        return {} if await live_workers(sessions) >= count else None

    await wait_for(ready, seconds=300)  # each loads the model


def manual(count: int, chunks_each: int) -> list[tuple[str, tuple[str, bytes, str]]]:
    body = "\n\n".join(f"## Part {p}\n\n{PARAGRAPH * 12}" for p in range(chunks_each))
    return [
        ("files", (f"manual{i}.md", f"# Manual {i}\n\n{body}".encode(), "text/markdown"))
        for i in range(count)
    ]


async def chunks_of(sessions: SessionMaker, tenant_id: str) -> dict[str, list[tuple[int, str]]]:
    async with tenant_transaction(sessions, tenant_id) as session:
        rows = await session.execute(
            text(
                "select d.external_id, c.chunk_index, c.content from chunks c join documents d"
                " on d.tenant_id = c.tenant_id and d.id = c.document_id"
                " where c.tenant_id = :t order by 1, 2"
            ),
            {"t": tenant_id},
        )
        found: dict[str, list[tuple[int, str]]] = {}
        for external_id, index, content in rows:
            found.setdefault(external_id, []).append((index, content))
    return found


async def test_two_worker_processes_share_the_queue_without_running_a_job_twice(
    owner_a: TenantClient, owner_b: TenantClient, settings: Settings, committed: SessionMaker
) -> None:
    with worker_processes(settings, 2):
        await wait_for_workers(committed, 2)
        jobs = [
            (owner, await submit(owner, files=manual(2, 2)))
            for _ in range(3)
            for owner in (owner_a, owner_b)
        ]
        states = [await finished(owner, job_id) for owner, job_id in jobs]
    pids = set()
    for state in states:
        assert state["status"] == "succeeded"
        assert sorted(r["position"] for r in state["results"]) == [0, 1]  # each ran once
        assert all(r["embedded"] == r["chunks"] for r in state["results"] if r["created"])
        pids |= {r["worker_pid"] for r in state["results"]}
    assert len(pids) == 2  # both workers took turns


async def test_a_killed_worker_is_replaced_and_the_job_completes_exactly(
    owner_a: TenantClient,
    settings: Settings,
    committed: SessionMaker,
    minilm: LocalEmbedder,
) -> None:
    upload = manual(10, 8)
    with worker_processes(settings, 1) as [first]:
        await wait_for_workers(committed, 1)
        job_id = await submit(owner_a, files=upload)

        async def some_done() -> dict[str, Any] | None:
            state = await job_state(owner_a, job_id)
            return state if state["progress"]["documents_done"] >= 1 else None

        before = await some_done() or await wait_for(some_done)
        assert before["status"] == "running"
        first.send_signal(signal.SIGKILL)
        first.wait(30)
    with worker_processes(settings, 1):
        state = await finished(owner_a, job_id)
    assert state["status"] == "succeeded"
    assert sorted(r["position"] for r in state["results"]) == list(range(10))
    async with app_client(settings, committed, _Unclosable(minilm)) as http:
        reference = await new_tenant(http, settings, committed)
        for _field, (name, data, kind) in upload:
            reply = await http.post(
                "/api/rag/documents/upload",
                headers=reference.headers,
                files={"file": (name, data, kind)},
                data={"external_id": name},  # a job's file is known by its name
            )
            assert reply.status_code == 201, reply.text
    background = await chunks_of(committed, owner_a.tenant_id)
    synchronous = await chunks_of(committed, reference.tenant_id)
    assert len(background) == 10
    assert background == synchronous  # no chunk missing, none twice
