"""Every typed error of the client, each produced by a real reply of the live service."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator

import pytest
from rag_client import (
    AsyncRagClient,
    Forbidden,
    Invalid,
    NotFound,
    PayloadTooLarge,
    RagClient,
    RateLimited,
    Retry,
    ServiceUnavailable,
    Timeout,
    TransportError,
    Unauthorized,
    UnsupportedMediaType,
)

from app.settings import RedisFailurePolicy
from tests.client.conftest import TINY_TIER, UPLOAD_MAX_BYTES, LiveService, serve_in_thread

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 64


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def test_unauthorized_without_or_with_a_bad_token(live: LiveService) -> None:
    with RagClient(live.url) as anonymous, pytest.raises(Unauthorized) as missing:
        anonymous.search("anything")
    assert missing.value.status == 401
    assert missing.value.problem["type"] == missing.value.type
    with RagClient(live.url, "not-a-jwt") as bad, pytest.raises(Unauthorized):
        bad.list_documents()


def test_forbidden_without_the_scope(live: LiveService) -> None:
    token = live.token(live.tenant(), scopes="rag:search")
    with RagClient(live.url, token) as reader, pytest.raises(Forbidden) as refused:
        reader.ingest("some words")
    assert "rag:ingest" in refused.value.detail


def test_not_found_for_an_unknown_document(live: LiveService) -> None:
    with RagClient(live.url, live.token(live.tenant())) as rag, pytest.raises(NotFound):
        rag.delete_document(uuid.uuid4())


def test_invalid_carries_the_field_errors(live: LiveService) -> None:
    with RagClient(live.url, live.token(live.tenant())) as rag, pytest.raises(Invalid) as bad:
        rag.search("volcano", max_results=101, threshold=3.0)
    assert bad.value.status == 422
    assert {error.field for error in bad.value.errors} == {"max_results", "threshold"}
    assert all(error.message for error in bad.value.errors)


def test_payload_too_large_and_unsupported_media_type(live: LiveService) -> None:
    with RagClient(live.url, live.token(live.tenant())) as rag:
        with pytest.raises(PayloadTooLarge):
            rag.upload(b"a" * (UPLOAD_MAX_BYTES + 1), filename="big.txt")
        with pytest.raises(UnsupportedMediaType) as png:
            rag.upload(PNG, filename="picture.txt")
        assert "PNG" in png.value.detail
        assert rag.list_documents().total == 0


def _list_three_times(rag: RagClient) -> None:
    for _ in range(3):
        rag.list_documents()


def test_rate_limited_carries_retry_after_and_retries_honour_it(live: LiveService) -> None:
    tenant = live.tenant(tier=TINY_TIER)
    with RagClient(live.url, live.token(tenant)) as rag:
        with pytest.raises(RateLimited) as limited:
            _list_three_times(rag)
        assert limited.value.retry_after is not None
        assert 0 < limited.value.retry_after <= 2
    waits: list[tuple[int, float]] = []
    told = Retry(attempts=4, max_wait=5, on_wait=lambda error, s: waits.append((error.status, s)))
    with RagClient(live.url, live.token(tenant), retries=told) as patient:
        for _ in range(3):  # the third waits out the window instead of failing
            assert patient.list_documents().total == 0
    assert waits, "on_wait was not called"
    assert all(status == 429 and 0 < seconds <= 2 for status, seconds in waits), waits
    hasty = RagClient(live.url, live.token(tenant), retries=Retry(max_wait=0.001))
    with hasty, pytest.raises(RateLimited):  # asked to wait longer than it may: fails at once
        _list_three_times(hasty)


@pytest.fixture(scope="module")
def without_redis(live: LiveService) -> Iterator[str]:
    """The service with its Redis gone and the limiter failing closed: 503 + Retry-After."""
    broken = live.settings.model_copy(
        update={
            "redis_url": f"redis://127.0.0.1:{_closed_port()}/0",
            "rate_limit_redis_failure": RedisFailurePolicy.FAIL_CLOSED,
        }
    )
    running = serve_in_thread(broken)
    try:
        yield running.url
    finally:
        running.stop()


async def test_service_unavailable_carries_retry_after(
    live: LiveService, without_redis: str
) -> None:
    token = live.token(live.tenant())
    async with AsyncRagClient(without_redis, token, retries=Retry(max_wait=0)) as rag:
        with pytest.raises(ServiceUnavailable) as down:
            await rag.search("anything")
    assert down.value.retry_after is not None
    assert down.value.retry_after >= 1


def test_transport_errors_and_timeouts() -> None:
    nowhere = RagClient(f"http://127.0.0.1:{_closed_port()}")
    with nowhere, pytest.raises(TransportError):
        nowhere.list_documents()
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        host, port = silent.getsockname()
        with RagClient(f"http://{host}:{port}", timeout=0.5) as slow, pytest.raises(Timeout):
            slow.list_documents()
