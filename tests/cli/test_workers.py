"""`rag serve`'s default number of worker processes, and what it hands down to them."""

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


HANDED_DOWN = (
    "RAG_DATABASE_URL",
    "RAG_JWT_SECRET",
    "RAG_MIGRATION_DATABASE_URL",
    "RAG_RATE_LIMIT_INSTANCES",
    "RAG_EMBEDDING_THREADS",
)


@pytest.mark.parametrize(("cores", "workers", "threads"), [(2, 2, "1"), (8, 2, "4"), (2, 4, "1")])
def test_each_worker_embeds_on_its_share_of_the_cores(
    monkeypatch: pytest.MonkeyPatch, cores: int, workers: int, threads: str
) -> None:
    for name in HANDED_DOWN:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(server, "available_cores", lambda: cores)
    server._hand_down(settings(), workers)
    assert os.environ["RAG_EMBEDDING_THREADS"] == threads
    assert os.environ["RAG_RATE_LIMIT_INSTANCES"] == str(workers)


def test_threads_set_by_the_operator_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in HANDED_DOWN:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAG_EMBEDDING_THREADS", "3")
    monkeypatch.setattr(server, "available_cores", lambda: 2)
    server._hand_down(settings(), 2)
    assert os.environ["RAG_EMBEDDING_THREADS"] == "3"
