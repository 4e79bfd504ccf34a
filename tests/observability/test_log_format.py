"""The log format choice, the text form, the logging thread, and the multiprocess files'
housekeeping: small pieces the process-level tests rely on."""

from __future__ import annotations

import io
import json
import logging
import os
from pathlib import Path

import pytest
from asgi_correlation_id import correlation_id

from app.observability import exposition
from app.observability.logs import (
    BackgroundHandler,
    ServiceJsonFormatter,
    ServiceTextFormatter,
    is_request_id,
    resolve,
)
from app.settings import LogFormat


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_is_text_on_a_terminal_and_json_elsewhere() -> None:
    assert resolve(LogFormat.AUTO, Terminal()) is LogFormat.TEXT
    assert resolve(LogFormat.AUTO, io.StringIO()) is LogFormat.JSON
    assert resolve(LogFormat.JSON, Terminal()) is LogFormat.JSON
    assert resolve(LogFormat.TEXT, io.StringIO()) is LogFormat.TEXT


def record(message: str) -> logging.LogRecord:
    return logging.LogRecord("app.test", logging.INFO, __file__, 1, message, None, None)


def test_lines_through_the_logging_thread_carry_the_request_id() -> None:
    json_out, text_out = io.StringIO(), io.StringIO()
    handlers = [
        BackgroundHandler(ServiceJsonFormatter(), json_out),
        BackgroundHandler(ServiceTextFormatter(), text_out),
    ]
    token = correlation_id.set("req-7")
    try:
        for handler in handlers:
            handler.handle(record("inside a request"))
    finally:
        correlation_id.reset(token)
    for handler in handlers:
        handler.handle(record("outside"))
        handler.close()  # flushes the queue
        handler.close()  # twice is harmless (and at exit)
    inside, outside = (json.loads(line) for line in json_out.getvalue().splitlines())
    assert inside["request_id"] == "req-7"
    assert inside["message"] == "inside a request"
    assert (inside["level"], inside["logger"]) == ("INFO", "app.test")
    assert "request_id" not in outside
    assert text_out.getvalue().splitlines() == ["inside a request [req-7]", "outside"]


@pytest.mark.parametrize("value", ["a", "A" * 128, "x.y:z_w-1", "0f" * 16])
def test_well_formed_request_ids(value: str) -> None:
    assert is_request_id(value)


@pytest.mark.parametrize("value", ["", "A" * 129, "-a", "a b", "a\nb", "é", "a/b", "{x}"])
def test_malformed_request_ids(value: str) -> None:
    assert not is_request_id(value)


def test_live_gauges_of_dead_workers_are_dropped(tmp_path: Path) -> None:
    gone = 4_000_000
    while os.path.exists(f"/proc/{gone}"):
        gone -= 1
    mine = tmp_path / f"gauge_livesum_{os.getpid()}.db"
    dead = tmp_path / f"gauge_livesum_{gone}.db"
    counter = tmp_path / f"counter_{gone}.db"  # a dead worker's counts still count
    for path in (mine, dead, counter):
        path.write_bytes(b"")
    exposition._forget_dead_processes(tmp_path)
    assert mine.exists()
    assert not dead.exists()
    assert counter.exists()


def test_workers_share_an_emptied_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(exposition.MULTIPROC_ENV, raising=False)
    with exposition.shared_between_workers() as made:
        assert os.environ[exposition.MULTIPROC_ENV] == str(made)
        (made / "counter_1.db").write_bytes(b"")
    assert not made.exists()
    assert exposition.MULTIPROC_ENV not in os.environ
    given = tmp_path / "given"
    given.mkdir()
    (given / "counter_2.db").write_bytes(b"from an earlier run")
    monkeypatch.setenv(exposition.MULTIPROC_ENV, str(given))
    with exposition.shared_between_workers() as used:
        assert used == given
        assert list(given.glob("*.db")) == []
    assert given.exists()
