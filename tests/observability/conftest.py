"""Log capture as `rag serve` writes its lines (JSON, request id filter, its logger levels)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from app.observability.logs import RequestIdFilter, ServiceJsonFormatter, logging_config
from app.settings import LogFormat

CLIENT_LOGGERS = ("httpx", "httpcore")  # the tests' own HTTP client, not the service


@dataclass(frozen=True, slots=True)
class CapturedLogs:
    buffer: io.StringIO

    def text(self) -> str:
        return self.buffer.getvalue()

    def lines(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.text().splitlines() if line.strip()]

    def access(self) -> list[dict[str, object]]:
        return [line for line in self.lines() if line.get("logger") == "app.access"]


@pytest.fixture
def service_logs() -> Iterator[CapturedLogs]:
    """Every line the service writes while the test runs, with `rag serve --verbose`'s levels
    (the most it ever writes), formatted as JSON."""
    yield from capture(verbose=True)


def capture(*, verbose: bool) -> Iterator[CapturedLogs]:
    buffer = io.StringIO()
    handler = logging.StreamHandler(buffer)
    handler.setFormatter(ServiceJsonFormatter())
    handler.addFilter(RequestIdFilter())
    config = logging_config(LogFormat.JSON, verbose=verbose)
    levels = {name: spec["level"] for name, spec in config["loggers"].items() if "level" in spec}
    levels |= dict.fromkeys(CLIENT_LOGGERS, "WARNING")
    root = logging.getLogger()
    saved = {name: logging.getLogger(name).level for name in levels} | {"": root.level}
    for name, level in levels.items():
        logging.getLogger(name).setLevel(level)
    root.setLevel(config["root"]["level"])
    root.addHandler(handler)
    try:
        yield CapturedLogs(buffer)
    finally:
        root.removeHandler(handler)
        for name, level in saved.items():
            logging.getLogger(name or None).setLevel(level)


# The fake OpenAI server of tests/embeddings: `rag serve` embeds with it and starts in seconds.
from tests.embeddings.conftest import openai_server  # noqa: E402, F401
