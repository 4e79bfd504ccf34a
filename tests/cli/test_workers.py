"""`rag serve`'s default number of worker processes."""

from __future__ import annotations

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
