"""The second stage against local fakes of each rerank wire format: the reranker's order,
its scores and time in the reply, through search and context; and a reranker that fails,
times out, refuses or rate limits never fails a search (the first stage's order, a note,
a metric and a log line) nor makes the instance unready."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from httpx import ASGITransport, AsyncClient
from prometheus_client import REGISTRY
from pydantic import SecretStr

from app.cli.backend import asked
from app.cli.local import InProcess
from app.db.tenancy import SessionMaker
from app.inputs.search import ContextInput, SearchInput
from app.permissions import EVERY_DOCUMENT
from app.resources import Resources
from app.settings import RerankProvider, Settings
from tests.conftest import TenantClient, new_tenant, resources_of, running_app
from tests.fakes import WordHashEmbedder
from tests.mcp.conftest import mcp_settings, structured
from tests.rerank.fake import FakeReranker, fake_reranker

pytestmark = pytest.mark.on_citus

NOTES = [
    ("Harbour cranes", "The harbour cranes lift containers from ships at dawn."),
    ("Harbour pilots", "Harbour pilots guide ships through the harbour channel."),
    ("Harbour zebra", "A zebra statue stands by the harbour gate; zebra stripes, zebra paint."),
    ("Harbour fees", "The harbour charges fees for every ship that docks overnight."),
]


@asynccontextmanager
async def served(
    settings: Settings,
    sessions: SessionMaker,
    embedder: WordHashEmbedder,
    fake: FakeReranker | None,
    *,
    wait_seconds: float = 5.0,
) -> AsyncIterator[TenantClient]:
    async with serving(settings, sessions, embedder, fake, wait_seconds=wait_seconds) as (
        tenant,
        _resources,
    ):
        yield tenant


@asynccontextmanager
async def serving(
    settings: Settings,
    sessions: SessionMaker,
    embedder: WordHashEmbedder,
    fake: FakeReranker | None,
    *,
    wait_seconds: float = 5.0,
) -> AsyncIterator[tuple[TenantClient, Resources]]:
    """The app with the notes ingested for a tenant, and its resources (the in-process
    command line's)."""
    configured = mcp_settings(
        settings,
        **{
            "rerank_provider": RerankProvider(fake.provider) if fake else RerankProvider.NONE,
            "rerank_url": fake.url if fake else None,
            "rerank_api_key": SecretStr("rerank-key"),
            "rerank_model": "rerank-test",
            "rerank_timeout_seconds": wait_seconds,
        },
    )
    async with (
        running_app(configured, sessions, embedder) as app,
        AsyncClient(transport=ASGITransport(app), base_url="http://test") as http,
    ):
        tenant = await new_tenant(http, configured, sessions)
        for title, content in NOTES:
            reply = await http.post(
                "/api/rag/documents",
                json={"title": title, "content": content},
                headers=tenant.headers,
            )
            assert reply.status_code == 201, reply.text
        yield tenant, resources_of(app)


async def post(tenant: TenantClient, path: str, **body: object) -> dict[str, object]:
    reply = await tenant.http.post(path, json=body, headers=tenant.headers)
    assert reply.status_code == 200, reply.text
    found: dict[str, object] = reply.json()
    return found


@pytest.mark.parametrize("provider", ["cohere", "jina", "tei"])
async def test_the_reranker_orders_the_first_stages_candidates(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder, provider: str
) -> None:
    with fake_reranker(provider, favourite="zebra") as fake:
        async with served(settings, sessions, embedder, fake) as tenant:
            found = await post(tenant, "/api/rag/search", query="harbour ships", max_results=2,
                               threshold=0.1)  # fmt: skip
            chunks = found["chunks"]
            assert isinstance(chunks, list)
            assert chunks[0]["title"] == "Harbour zebra"
            assert chunks[0]["rerank_score"] > chunks[1]["rerank_score"]
            assert found["reranked"] is True
            assert found["rerank_note"] is None
            timings = found["timings"]
            assert isinstance(timings, dict)
            assert timings["rerank_ms"] >= 0
            _path, headers, body = fake.requests[-1]
            assert body["query"] == "harbour ships"
            if provider == "tei":
                assert len(body["texts"]) == 4  # every candidate, not only max_results
            else:
                assert (body["model"], len(body["documents"]), body["top_n"]) == (
                    "rerank-test",
                    4,
                    4,
                )
                assert headers["authorization"] == "Bearer rerank-key"

            plain = await post(tenant, "/api/rag/search", query="harbour ships", max_results=2,
                               threshold=0.1, rerank=False)  # fmt: skip
            assert plain["reranked"] is False
            plain_chunks = plain["chunks"]
            assert isinstance(plain_chunks, list)
            assert plain_chunks[0]["title"] != "Harbour zebra"  # the reranker's doing
            assert len(fake.requests) == 1  # not asked
            context = await post(tenant, "/api/rag/context", query="harbour ships",
                                 max_results=1, threshold=0.1)  # fmt: skip
            assert "zebra" in str(context["context"])
            tool = await structured(tenant.http, tenant, "search", query="harbour ships",
                                    max_results=1)  # fmt: skip
            assert tool["results"][0]["title"] == "Harbour zebra"  # the same through MCP


@pytest.mark.parametrize(
    ("statuses", "delay", "why"),
    [([500], 0.0, "the reranker failed (500)"), ([200], 2.0, "did not answer in time")],
)
async def test_a_failing_reranker_leaves_the_first_stages_order(
    settings: Settings,
    sessions: SessionMaker,
    embedder: WordHashEmbedder,
    statuses: list[int],
    delay: float,
    why: str,
) -> None:
    with fake_reranker("cohere", favourite="zebra") as fake:
        async with served(settings, sessions, embedder, fake, wait_seconds=0.5) as tenant:
            first = await post(tenant, "/api/rag/search", query="harbour ships", max_results=2,
                               threshold=0.1, rerank=False)  # fmt: skip
            fake.statuses, fake.delay_seconds = statuses, delay
            found = await post(tenant, "/api/rag/search", query="harbour ships", max_results=2,
                               threshold=0.1)  # fmt: skip
            assert found["chunks"] == first["chunks"]
            assert found["reranked"] is False
            assert why in str(found["rerank_note"])


def counted(name: str, **labels: str) -> float:
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.mark.parametrize(
    ("status", "outcome", "why", "level"),
    [
        (429, "skipped", "the reranker is rate limiting (429)", logging.WARNING),
        (401, "refused", "the reranker refused the request (401)", logging.ERROR),
    ],
)
async def test_a_reranker_that_refuses_or_rate_limits_never_makes_the_instance_unready(
    settings: Settings,
    sessions: SessionMaker,
    embedder: WordHashEmbedder,
    caplog: pytest.LogCaptureFixture,
    status: int,
    outcome: str,
    why: str,
    level: int,
) -> None:
    """An optional stage's failure is a metric and a log line: /readyz stays 200 (one 429 took
    every instance out of a load balancer's rotation)."""
    with fake_reranker("jina", favourite="zebra") as fake:
        async with served(settings, sessions, embedder, fake) as tenant:
            before = counted("rag_rerank_total", outcome=outcome)
            fake.statuses = [status]
            found = await post(tenant, "/api/rag/search", query="harbour", threshold=0.1)
            assert why in str(found["rerank_note"])
            ready = await tenant.http.get("/readyz")
            assert ready.status_code == 200, ready.text
            assert "reranker" not in ready.json()["checks"]
            assert counted("rag_rerank_total", outcome=outcome) - before == 1
            assert counted("rag_rerank_refusing") == (1.0 if status == 401 else 0.0)
            assert any(r.levelno == level and why in r.getMessage() for r in caplog.records)
            fake.statuses = [200]
            found = await post(tenant, "/api/rag/search", query="harbour", threshold=0.1)
            assert found["reranked"] is True
            assert counted("rag_rerank_refusing") == 0.0


async def test_rerank_without_a_reranker_is_a_422(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    async with served(settings, sessions, embedder, None) as tenant:
        reply = await tenant.http.post(
            "/api/rag/search", json={"query": "harbour", "rerank": True}, headers=tenant.headers
        )
        assert reply.status_code == 422
        assert reply.json()["errors"][0]["field"] == "rerank"
        found = await post(tenant, "/api/rag/search", query="harbour", threshold=0.1)
        assert found["reranked"] is False
        assert found["rerank_note"] is None


async def test_the_command_lines_rerank_reaches_the_second_stage(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    """`rag search --rerank` and `rag context --rerank` in process: the input the options
    make, through the operation, ordered by the reranker; `--no-rerank` is not."""
    with fake_reranker("cohere", favourite="zebra") as fake:
        async with serving(settings, sessions, embedder, fake) as (tenant, resources):
            cli = InProcess(resources.reading_as_caller(EVERY_DOCUMENT), tenant.tenant_id)
            options = {"query": "harbour ships", "max_results": 2, "threshold": 0.1}
            api = await post(tenant, "/api/rag/search", **options, rerank=True)
            found = await cli.search(asked(SearchInput, **options, rerank=True))
            assert found.reranked is True
            assert found.chunks[0].title == "Harbour zebra"
            api_chunks = api["chunks"]
            assert isinstance(api_chunks, list)
            assert [str(c.chunk_id) for c in found.chunks] == [c["chunk_id"] for c in api_chunks]
            plain = await cli.search(asked(SearchInput, **options, rerank=False))
            assert plain.reranked is False
            assert plain.chunks[0].title != "Harbour zebra"
            asked_before = len(fake.requests)
            context = await cli.context(asked(ContextInput, **options, rerank=True))
            assert len(fake.requests) == asked_before + 1
            assert "zebra" in context.context
