"""Start-up output of `rag serve`: a line per stage, the libraries' detail only with --verbose.

Quiet by default: one line for the database (where, which version), one for the model, one
with the URL of the explorer and how to get a token, then the access log. `--verbose` shows
what embedded PostgreSQL, Alembic, sentence-transformers and the MCP SDK say at debug level.
Lines are JSON unless stderr is a terminal (RAG_LOG_FORMAT; app/observability/logs.py).
"""

from __future__ import annotations

from typing import Any

from app.observability import logs
from app.settings import LogFormat


def configure(*, verbose: bool, log_format: LogFormat = LogFormat.AUTO) -> dict[str, Any]:
    """Configure logging; the dictionary uvicorn's worker processes apply again."""
    return logs.configure(log_format, verbose=verbose)
