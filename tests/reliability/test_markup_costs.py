"""HTML built to cost a parser minutes: hundreds of thousands of elements. Through every door
that parses it (upload, JSON ingest) it answers within seconds, the event loop stays free
meanwhile, and the API process's memory stays flat (the page is parsed in a worker)."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from httpx import AsyncClient, Response
from sqlalchemy.ext.asyncio import AsyncEngine

from app.db.engine import create_sessionmaker
from app.settings import Settings
from tests.api.calls import DOCUMENTS
from tests.api.test_upload import upload
from tests.conftest import TenantClient, app_client, new_tenant
from tests.fakes import WordHashEmbedder

pytestmark = pytest.mark.slow
MB = 1024 * 1024
SECONDS = 15.0  # what a 2 MB page may take on a busy machine (it took 48 s in process)
GROWTH = 120 * MB  # what the API process may grow by while it parses one


def _paragraphs(size: int) -> bytes:
    """<html><body> and empty <p> elements, then one sentence: a tree of ~size/3 elements."""
    return b"<html><body>" + b"<p>" * (size // 3) + b"<p>The end of a long page."


def _rss() -> int:
    with open(f"/proc/{os.getpid()}/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def _timed(
    http: AsyncClient, send: Callable[[], Coroutine[Any, Any, Response]]
) -> tuple[Response, float, int]:
    """The reply, the seconds it took and how far the process's memory rose meanwhile; the
    event loop must answer /healthz all along."""
    start, before = time.perf_counter(), _rss()
    peak = before
    sending = asyncio.create_task(send())
    while not sending.done():
        peak = max(peak, _rss())
        reply = await asyncio.wait_for(http.get("/healthz"), timeout=2.0)
        assert reply.status_code == 200
        await asyncio.sleep(0.05)
    return await sending, time.perf_counter() - start, peak - before


async def test_a_2_mb_page_of_paragraphs_uploads_within_seconds(
    tenant: TenantClient, http: AsyncClient
) -> None:
    page = _paragraphs(2 * MB)
    reply, seconds, growth = await _timed(
        http, lambda: upload(tenant, "page.html", page, content_type="text/html")
    )
    assert reply.status_code == 201, reply.text
    assert reply.json()["chunks"] == 1
    assert seconds < SECONDS, f"{seconds:.1f} s"
    assert growth < GROWTH, f"+{growth / MB:.0f} MB"


async def test_a_2_mb_page_of_paragraphs_posted_as_json_answers_within_seconds(
    tenant: TenantClient, http: AsyncClient
) -> None:
    body = {"title": "Slow", "content": _paragraphs(2 * MB).decode(), "source_type": "html"}
    reply, seconds, growth = await _timed(
        http, lambda: http.post(DOCUMENTS, json=body, headers=tenant.headers)
    )
    assert reply.status_code == 201, reply.text
    assert seconds < SECONDS, f"{seconds:.1f} s"
    assert growth < GROWTH, f"+{growth / MB:.0f} MB"


async def test_three_such_pages_at_once_queue_for_the_workers_and_memory_stays_flat(
    settings: Settings, app_engine: AsyncEngine, embedder: WordHashEmbedder
) -> None:
    committed = create_sessionmaker(app_engine)  # three requests at once: three connections
    pages = [_paragraphs(2 * MB) + f"<p>Copy {n}.".encode() for n in range(3)]
    async with app_client(settings, committed, embedder) as http:
        tenant = await new_tenant(http, settings, committed)

        async def all_three() -> Response:
            replies = await asyncio.gather(
                *(
                    upload(tenant, f"page{n}.html", page, content_type="text/html")
                    for n, page in enumerate(pages)
                )
            )
            for reply in replies:
                assert reply.status_code == 201, reply.text
            return replies[0]

        _, seconds, growth = await _timed(http, all_three)
    assert seconds < 2 * SECONDS, f"{seconds:.1f} s"
    assert growth < GROWTH, f"+{growth / MB:.0f} MB"
