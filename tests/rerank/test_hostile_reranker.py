"""A hostile rerank server never fails a search nor holds it: a reply nested 100,000 deep or
otherwise undecodable, one that trickles a byte at a time past the deadline, one that never
ends. Each time the search answers in the first stage's order, with a note, within
RAG_RERANK_TIMEOUT_SECONDS (plus the first stage), having read a bounded part of the reply."""

from __future__ import annotations

import asyncio
import gzip
import time
from collections.abc import Iterator

import pytest

from app.db.tenancy import SessionMaker
from app.retrieval.rerank_reply import MIN_REPLY_BYTES
from app.settings import Settings
from tests.conftest import TenantClient
from tests.fakes import WordHashEmbedder
from tests.loopback import Reply
from tests.rerank.fake import fake_reranker
from tests.rerank.test_rerank import post, served

pytestmark = pytest.mark.on_citus

JSON = "application/json"
DEEP = 100_000
UNDECODABLE = {
    "nested arrays": b'{"results": ' + b"[" * DEEP + b"]" * DEEP + b"}",
    "nested objects": b'{"results": [' + b'{"a": ' * DEEP + b"1" + b"}" * DEEP + b"]}",
    "not utf-8": b'{"results": [{"index": 0, "relevance_score": "\xff\xfe"}]}',
    "infinite index": b'{"results": [{"index": 1e999, "relevance_score": 1}]}',
    "nan score": b'{"results": [{"index": 0, "relevance_score": NaN}]}',
    "a digit string past int's limit": b'{"results": [{"index": ' + b"9" * 5000 + b", "
    b'"relevance_score": 1}]}',
    "null index": b'{"results": [{"index": null, "relevance_score": 1}]}',
    "results an object": b'{"results": {"index": 0}}',
    "results a string": b'{"results": "abc"}',
    "a bare number": b"12",
    "empty": b"",
}


async def search_now(tenant: TenantClient) -> tuple[dict[str, object], float]:
    started = time.perf_counter()
    found = await post(tenant, "/api/rag/search", query="harbour ships", max_results=2,
                       threshold=0.1)  # fmt: skip
    return found, time.perf_counter() - started


@pytest.mark.parametrize("kind", sorted(UNDECODABLE))
async def test_an_undecodable_reply_leaves_the_first_stages_order(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder, kind: str
) -> None:
    with fake_reranker("cohere", favourite="zebra") as fake:
        async with served(settings, sessions, embedder, fake) as tenant:
            first = await post(tenant, "/api/rag/search", query="harbour ships", max_results=2,
                               threshold=0.1, rerank=False)  # fmt: skip
            fake.reply = lambda: Reply(200, UNDECODABLE[kind], JSON)
            found, _ = await search_now(tenant)
            assert found["chunks"] == first["chunks"]
            assert found["reranked"] is False
            assert "reply was not understood" in str(found["rerank_note"])


async def test_a_trickling_reranker_cannot_hold_a_search_past_the_deadline(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    """One byte every 0.3 s never trips a per-read timeout of 1 s; the deadline of the whole
    call does."""
    with fake_reranker("tei", favourite="zebra") as fake:
        async with served(settings, sessions, embedder, fake, wait_seconds=1.0) as tenant:
            body = b'[{"index": 0, "score": 1.0}]' + b" " * 100
            fake.reply = lambda: Reply(200, b"", JSON, chunks=iter([bytes([c]) for c in body]),
                                       pause_seconds=0.3)  # fmt: skip
            found, took = await search_now(tenant)
            assert found["reranked"] is False
            assert "did not answer in time" in str(found["rerank_note"])
            assert took < 1.0 + 2.0, took  # the deadline, plus the first stage's time


async def test_a_reply_past_the_size_bound_is_not_read_further(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    """64 MiB offered: the reading stops past the bound, the connection is dropped (the
    server's writes start failing well before the end) and the rerank counts as failed."""
    sent = [0]
    block = b" " * 65536

    def endless() -> Iterator[bytes]:
        for _ in range(1024):
            sent[0] += len(block)
            yield block

    with fake_reranker("jina", favourite="zebra") as fake:
        async with served(settings, sessions, embedder, fake, wait_seconds=30.0) as tenant:
            fake.reply = lambda: Reply(200, b'{"results": [', JSON, chunks=endless())
            found, took = await search_now(tenant)
            assert found["reranked"] is False
            assert "reply was too large" in str(found["rerank_note"])
            assert took < 10, took
            await asyncio.sleep(0.5)  # the fake's thread sees the hang-up
            assert sent[0] < MIN_REPLY_BYTES + 16 * 2**20, sent[0]  # socket buffers aside


async def test_a_declared_length_past_the_bound_or_a_compressed_reply_is_not_read(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    bomb = gzip.compress(b'{"results": [' + b" " * 50 * 2**20 + b"]}")
    replies = {
        "too large": Reply(200, b" " * (MIN_REPLY_BYTES + 2**20), JSON),
        "compressed: gzip": Reply(200, bomb, JSON, headers=(("content-encoding", "gzip"),)),
    }
    with fake_reranker("cohere", favourite="zebra") as fake:
        async with served(settings, sessions, embedder, fake) as tenant:
            for why, reply in replies.items():
                fake.reply = lambda reply=reply: reply
                found, _ = await search_now(tenant)
                assert found["reranked"] is False
                assert why in str(found["rerank_note"]), found["rerank_note"]
