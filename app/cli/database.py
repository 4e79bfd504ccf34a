"""Where the CLI's database comes from: RAG_DATABASE_URL, or the embedded server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

from pydantic import SecretStr

from app.db import embedded
from app.settings import Settings


@contextmanager
def database_settings(settings: Settings) -> Iterator[Settings]:
    """Settings with both database URLs set; starts, provisions and finally stops the embedded
    server when none is configured (other `rag` processes attached to it keep it running)."""
    if settings.database_url is not None:
        owner = settings.migration_database_url or settings.database_url
        yield settings.model_copy(update={"migration_database_url": owner})
        return
    server = embedded.start_embedded(settings.data_dir / "pgdata")
    try:
        url = asyncio.run(
            embedded.provision(
                server,
                app_role=settings.app_role,
                embedding_dimensions=settings.embedding_dimensions,
            )
        )
        owner_url = server.url(user=embedded.OWNER_ROLE, database=embedded.DATABASE)
        yield settings.model_copy(
            update={"database_url": SecretStr(url), "migration_database_url": SecretStr(owner_url)}
        )
    finally:
        server.stop()
