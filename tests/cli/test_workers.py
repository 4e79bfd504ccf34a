"""`rag serve`'s defaults for several processes: how many workers, and how many ONNX threads
each gets."""

from __future__ import annotations

import os

import pytest
from pydantic import SecretStr

from app.cli import server
from app.settings import Settings


def settings(**values: object) -> Settings:
    return Settings(_env_file=None, jwt_secret=SecretStr("x" * 40), **values)  # type: ignore[arg-type]


def test_one_worker_per_core_when_redis_holds_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "available_cores", lambda: 4)
    assert server.default_workers(settings(redis_url="redis://127.0.0.1:6379/0")) == 4
    assert server.default_workers(settings(redis_url=None)) == 1  # the limit would be split


def test_the_cores_are_shared_out_between_the_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "available_cores", lambda: 4)
    assert [server.embedding_threads(n) for n in (1, 2, 3, 4, 8)] == [4, 2, 1, 1, 1]


def test_workers_get_their_threads_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "available_cores", lambda: 2)
    for name in ("RAG_EMBEDDING_THREADS", "RAG_RATE_LIMIT_INSTANCES", "RAG_JWT_SECRET"):
        monkeypatch.setenv(name, "")  # restored (or removed) after the test
        monkeypatch.delenv(name)
    server._hand_down(settings(), 2)
    assert os.environ["RAG_EMBEDDING_THREADS"] == "1"
    monkeypatch.delenv("RAG_EMBEDDING_THREADS")
    server._hand_down(settings(embedding_threads=3), 2)  # the operator's choice stands
    assert "RAG_EMBEDDING_THREADS" not in os.environ
