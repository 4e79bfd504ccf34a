"""`rag mcp --tenant T`: the MCP tools over stdio, for a desktop agent on this machine."""

from __future__ import annotations

import logging
import sys
from typing import Annotated

import typer


def mcp(
    tenant: Annotated[str, typer.Option(help="Tenant whose documents the tools search.")],
) -> None:
    """Serve the MCP tools over stdio (the embedded database when RAG_DATABASE_URL is not set).

    Claude Desktop and other MCP hosts start this command themselves: docs/REFERENCE.md,
    "Agents (MCP)", has the configuration to paste. stdout is the protocol channel; messages go
    to stderr.
    """
    import asyncio

    from app.cli.database import database_settings
    from app.cli.settings import load_settings
    from app.errors import AppError
    from app.mcp.stdio import serve_stdio

    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s"
    )
    with database_settings(load_settings()) as settings:
        try:
            asyncio.run(serve_stdio(settings, tenant))
        except AppError as error:
            typer.echo(f"error: {error.detail}", err=True)
            raise typer.Exit(2) from None
