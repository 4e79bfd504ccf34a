"""The OpenAI embedder against a real local server speaking the OpenAI embeddings wire format."""

from __future__ import annotations

import base64
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

import numpy as np
import pytest

from app.embeddings import openai_reply
from app.embeddings.base import Embedder, EmbeddingConfigError, EmbeddingError
from app.embeddings.openai_provider import (
    OpenAIEmbedder,
    RetryPolicy,
    plan_batches,
    retry_after_seconds,
)
from app.errors import ServiceUnavailable, Unprocessable
from app.settings import EmbeddingProvider, Settings
from tests.embeddings.fakes import FakeOpenAI, ScriptedReply, fake_vector, unit


class SleepRecorder:
    """Replaces anyio.sleep: records the waits, waits for nothing."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def settings_for(url: str, *, retries: int = 3, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "embedding_provider": EmbeddingProvider.OPENAI,
        "openai_api_key": "test-key",
        "openai_base_url": url,
        "openai_max_retries": retries,
        "embedding_dimensions": 384,
    }
    values.update(overrides)
    return Settings.model_validate(values)


Make = Callable[..., OpenAIEmbedder]


@pytest.fixture
async def make(openai_url: str) -> AsyncIterator[Make]:
    """Builds embedders against the fake server and closes them after the test."""
    built: list[OpenAIEmbedder] = []

    def build(
        *,
        sleep: SleepRecorder | None = None,
        send_dimensions: bool | None = None,
        url: str = openai_url,
        retries: int = 3,
        **overrides: object,
    ) -> OpenAIEmbedder:
        embedder = OpenAIEmbedder.from_settings(
            settings_for(url, retries=retries, **overrides),
            sleep=sleep or SleepRecorder(),
            send_dimensions=send_dimensions,
        )
        built.append(embedder)
        return embedder

    yield build
    for embedder in built:
        await embedder.aclose()


async def test_embeds_through_the_wire_format(fake_openai: FakeOpenAI, make: Make) -> None:
    embedder = make()
    assert isinstance(embedder, Embedder)
    assert embedder.model_id == "openai:text-embedding-3-small@384"
    vector = await embedder.embed_query("hello")
    assert vector == pytest.approx(unit(fake_vector("hello", 384)))
    [request] = fake_openai.requests
    assert request["model"] == "text-embedding-3-small"
    assert request["input"] == ["hello"]
    assert request["dimensions"] == 384
    assert request["encoding_format"] == "base64"


async def test_dimensions_are_sent_only_where_they_are_understood(
    fake_openai: FakeOpenAI, make: Make
) -> None:
    await make(embedding_dimensions=1536).embed_query("native size")
    fake_openai.native_dimensions = 384
    await make(embedding_model="nomic-embed-text").embed_query("not text-embedding-3")
    await make(embedding_model="nomic-embed-text", send_dimensions=True).embed_query("forced")
    assert ["dimensions" in request for request in fake_openai.requests] == [False, False, True]


async def test_large_inputs_are_split_into_requests_and_kept_in_order(
    fake_openai: FakeOpenAI, make: Make
) -> None:
    texts = [f"text number {i}" for i in range(7)]
    vectors = await make(embedding_batch_size=3).embed_documents(texts)
    sizes = [len(request["input"]) for request in fake_openai.requests]  # type: ignore[arg-type]
    assert sorted(sizes) == [1, 3, 3]
    assert vectors == [pytest.approx(unit(fake_vector(t, 384))) for t in texts]


async def test_results_are_ordered_by_index(fake_openai: FakeOpenAI, make: Make) -> None:
    fake_openai.reverse = True
    texts = ["first", "second", "third"]
    vectors = await make(embedding_passage_prefix="passage: ").embed_documents(texts)
    assert vectors == [pytest.approx(unit(fake_vector(f"passage: {t}", 384))) for t in texts]


async def test_base64_vectors_equal_the_float_ones_within_float32_precision(
    fake_openai: FakeOpenAI, make: Make
) -> None:
    texts = ["first", "second", "third"]
    packed = await make().embed_documents(texts)
    plain = await make(openai_encoding_format="float").embed_documents(texts)
    assert [request["encoding_format"] for request in fake_openai.requests] == ["base64", "float"]
    assert plain == [pytest.approx(unit(fake_vector(t, 384)), rel=1e-12) for t in texts]
    assert packed == [pytest.approx(vector, rel=1e-6, abs=1e-7) for vector in plain]
    assert packed != plain  # float32 on the wire, float64 in JSON numbers


async def test_a_server_answering_floats_to_a_base64_request_still_works(
    fake_openai: FakeOpenAI, make: Make
) -> None:
    fake_openai.floats_only = True
    texts = ["one", "two"]
    assert await make().embed_documents(texts) == [
        pytest.approx(unit(fake_vector(t, 384))) for t in texts
    ]
    assert fake_openai.requests[0]["encoding_format"] == "base64"


async def test_a_batch_is_decoded_off_the_event_loop_and_a_query_on_it(
    fake_openai: FakeOpenAI, make: Make, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[int] = []
    decode = openai_reply.unit_vectors

    def spy(body: bytes, **kwargs: Any) -> list[list[float]]:
        threads.append(threading.get_ident())
        return decode(body, **kwargs)

    monkeypatch.setattr(openai_reply, "unit_vectors", spy)
    embedder = make()
    await embedder.embed_query("one query")
    await embedder.embed_documents([f"passage {i}" for i in range(64)])
    assert threads[0] == threading.get_ident() != threads[1]


def reply_with(embedding: object, **item: object) -> dict[str, object]:
    data = [{"object": "embedding", "index": 0, "embedding": embedding, **item}]
    return {"object": "list", "data": data, "model": "text-embedding-3-small"}


def packed(values: list[float]) -> str:
    return base64.b64encode(np.asarray(values, dtype="<f4").tobytes()).decode()


@pytest.mark.parametrize(
    ("reply", "message"),
    [
        (ScriptedReply(200, raw=b"<html>gateway</html>"), "not JSON"),
        (ScriptedReply(200, body={"object": "list"}), "no `data` list"),
        (ScriptedReply(200, body=reply_with(packed([0.5] * 384), index=None)), "`index`"),
        (ScriptedReply(200, body=reply_with("@@not base64@@")), "not valid base64"),
        (ScriptedReply(200, body=reply_with("AAAAAAA=")), "5 bytes"),
        (ScriptedReply(200, body=reply_with(["a"] * 384)), "not a list of numbers"),
        (ScriptedReply(200, body=reply_with([[0.5]] * 384)), "not a list of numbers"),
        (ScriptedReply(200, body=reply_with({"values": [0.5]})), "neither"),
        (ScriptedReply(200, body=reply_with(packed([float("nan")] * 384))), "not finite"),
    ],
)
async def test_a_malformed_reply_is_an_embedding_error(
    fake_openai: FakeOpenAI, make: Make, reply: ScriptedReply, message: str
) -> None:
    fake_openai.scripted.append(reply)
    with pytest.raises(EmbeddingError, match=message) as caught:
        await make().embed_query("garbled")
    assert not isinstance(caught.value, EmbeddingConfigError)
    assert "unreadable reply" in caught.value.detail
    assert len(fake_openai.requests) == 1


async def test_a_reply_with_too_few_or_too_many_vectors_is_refused(
    fake_openai: FakeOpenAI, make: Make
) -> None:
    twice = reply_with(packed([0.5] * 384))
    twice["data"] = [*twice["data"], *twice["data"]]  # type: ignore[misc]
    fake_openai.scripted.append(ScriptedReply(200, body=twice))
    with pytest.raises(EmbeddingError, match="answered 2 vectors for 1 inputs"):
        await make().embed_query("once")


@pytest.mark.parametrize(
    ("headers", "expected_wait"),
    [({"Retry-After": "2"}, 2.0), ({"retry-after-ms": "250", "Retry-After": "1"}, 0.25)],
)
async def test_rate_limits_are_retried_after_the_servers_delay(
    fake_openai: FakeOpenAI, make: Make, headers: dict[str, str], expected_wait: float
) -> None:
    fake_openai.scripted.append(ScriptedReply(429, headers))
    sleep = SleepRecorder()
    vector = await make(sleep=sleep).embed_query("busy")
    assert vector == pytest.approx(unit(fake_vector("busy", 384)))
    assert sleep.waits == [pytest.approx(expected_wait)]
    assert len(fake_openai.requests) == 2


async def test_server_errors_back_off_then_give_up_with_503(
    fake_openai: FakeOpenAI, make: Make
) -> None:
    fake_openai.scripted.extend(ScriptedReply(500) for _ in range(5))
    sleep = SleepRecorder()
    with pytest.raises(EmbeddingError) as caught:
        await make(sleep=sleep, retries=2).embed_query("down")
    assert isinstance(caught.value, ServiceUnavailable)
    assert caught.value.status == 503
    assert "Retry-After" in caught.value.headers
    assert len(fake_openai.requests) == 3
    assert len(sleep.waits) == 2
    assert 0.25 <= sleep.waits[0] <= 0.5 <= sleep.waits[1] <= 1.0  # exponential, jittered


async def test_a_long_retry_after_is_passed_on_instead_of_waited(
    fake_openai: FakeOpenAI, make: Make
) -> None:
    fake_openai.scripted.append(ScriptedReply(429, {"Retry-After": "120"}))
    sleep = SleepRecorder()
    with pytest.raises(EmbeddingError) as caught:
        await make(sleep=sleep).embed_query("later")
    assert caught.value.headers["Retry-After"] == "120"
    assert sleep.waits == []


@pytest.mark.parametrize(
    ("reply", "error", "message"),
    [
        (ScriptedReply(401), EmbeddingConfigError, "RAG_OPENAI_API_KEY"),
        (ScriptedReply(404), EmbeddingConfigError, "RAG_EMBEDDING_MODEL"),
        (ScriptedReply(400), EmbeddingError, "HTTP 400"),
        (
            ScriptedReply(429, body={"error": {"code": "insufficient_quota", "message": "pay"}}),
            EmbeddingError,
            "HTTP 429",
        ),
    ],
)
async def test_permanent_failures_are_not_retried(
    fake_openai: FakeOpenAI,
    make: Make,
    reply: ScriptedReply,
    error: type[EmbeddingError],
    message: str,
) -> None:
    fake_openai.scripted.append(reply)
    with pytest.raises(error, match=message):
        await make().embed_query("no")
    assert len(fake_openai.requests) == 1


async def test_an_unreachable_server_is_retried_then_503(dead_url: str, make: Make) -> None:
    sleep = SleepRecorder()
    with pytest.raises(EmbeddingError, match="unreachable after 3 attempt"):
        await make(sleep=sleep, url=dead_url, retries=2).embed_query("anyone?")
    assert len(sleep.waits) == 2


@pytest.mark.parametrize(
    ("encoding_format", "floats_only"), [("base64", False), ("base64", True), ("float", False)]
)
async def test_a_dimension_mismatch_names_the_setting(
    fake_openai: FakeOpenAI, make: Make, encoding_format: str, floats_only: bool
) -> None:
    fake_openai.force_dimensions = 1536
    fake_openai.floats_only = floats_only
    embedder = make(openai_encoding_format=encoding_format)
    with pytest.raises(EmbeddingConfigError, match="RAG_EMBEDDING_DIMENSIONS=1536"):
        await embedder.embed_query("too wide")


async def test_empty_text_is_refused_before_any_request(
    fake_openai: FakeOpenAI, make: Make
) -> None:
    with pytest.raises(Unprocessable):
        await make().embed_documents(["fine", "  "])
    assert fake_openai.requests == []


async def test_check_probes_once_then_trusts_a_success(fake_openai: FakeOpenAI, make: Make) -> None:
    embedder = make()
    await embedder.check()
    await embedder.check()
    assert len(fake_openai.requests) == 1
    fake_openai.api_key = "rotated"
    with pytest.raises(EmbeddingConfigError):
        await make().check()


def test_batches_respect_input_and_character_budgets() -> None:
    texts = ["a" * 40, "b" * 40, "c" * 40, "d" * 150, "e"]
    assert [len(b) for b in plan_batches(texts, max_inputs=2, max_chars=100)] == [2, 1, 1, 1]
    assert plan_batches([], max_inputs=2, max_chars=100) == []


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),
        ({"retry-after": "soon"}, None),
        ({}, None),
    ],
)
def test_retry_after_forms(headers: dict[str, str], seconds: float | None) -> None:
    assert retry_after_seconds(headers) == seconds


def test_a_key_is_required_without_a_compatible_base_url() -> None:
    settings = Settings.model_validate({"embedding_provider": "openai"})
    with pytest.raises(EmbeddingConfigError, match="RAG_OPENAI_API_KEY"):
        OpenAIEmbedder.from_settings(settings)


def test_retry_policy_backoff_grows_and_is_capped() -> None:
    policy = RetryPolicy(attempts=10, base_delay=1.0, max_delay=4.0)
    waits = [policy.backoff(n) for n in range(1, 6)]
    bounds: list[tuple[float, float]] = [(0.5, 1), (1, 2), (2, 4), (2, 4), (2, 4)]
    assert all(low <= wait <= high for wait, (low, high) in zip(waits, bounds, strict=True))


async def test_a_failed_request_makes_the_next_check_ask_again(
    fake_openai: FakeOpenAI, make: Make
) -> None:
    embedder = make(retries=0)
    await embedder.check()
    fake_openai.scripted.append(ScriptedReply(503))
    with pytest.raises(EmbeddingError):
        await embedder.embed_query("q")
    fake_openai.scripted.append(ScriptedReply(503))
    with pytest.raises(EmbeddingError, match="HTTP 503"):
        await embedder.check()
