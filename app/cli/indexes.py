"""`rag index`: dedicated HNSW indexes for large tenants (see app/db/indexes.py)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from app.settings import Settings

MEMORY = re.compile(r"[1-9][0-9]*(kB|MB|GB|TB)")  # PostgreSQL's memory units


def memory_size(value: str | None) -> str | None:
    if value is not None and not MEMORY.fullmatch(value):
        raise typer.BadParameter(f"{value!r} is not a size such as 512MB or 2GB (kB, MB, GB, TB)")
    return value


def index(
    min_chunks: Annotated[
        int | None,
        typer.Option(min=1, help="Tenants with this many chunks get their own index."),
    ] = None,
    dry_run: Annotated[bool, typer.Option(help="Show what would change; change nothing.")] = False,
    maintenance_work_mem: Annotated[
        str | None,
        typer.Option(
            callback=memory_size,
            help="For every build, e.g. 1GB. Default: what each tenant's graph needs, up to"
            " RAG_INDEX_BUILD_MEMORY_MAX_MB (a graph that does not fit is finished on disk).",
        ),
    ] = None,
) -> None:
    """Give every large tenant its own HNSW index, and drop those of tenants that shrank
    (under half of --min-chunks). Builds run CONCURRENTLY: the service keeps working."""
    import asyncio

    from rich.console import Console
    from rich.table import Table

    from app.cli.database import database_settings
    from app.cli.settings import load_settings

    with database_settings(load_settings()) as settings:
        threshold = min_chunks or settings.dedicated_index_min_chunks
        rows = asyncio.run(
            _index(
                settings,
                min_chunks=threshold,
                dry_run=dry_run,
                maintenance_work_mem=maintenance_work_mem,
            )
        )
    table = Table(title=f"dedicated HNSW indexes (tenants with >= {threshold} chunks)")
    for name in ("tenant", "chunks", "action", "seconds", "build memory"):
        table.add_column(name, justify="left" if name in {"tenant", "action"} else "right")
    for row in rows:
        table.add_row(*row)
    if rows:
        Console().print(table)
    if all(action == "kept" for _, _, action, _, _ in rows):
        kept = f" ({len(rows)} dedicated indexes kept)" if rows else ""
        Console().print(f"nothing to do: no tenant crossed {threshold} chunks either way{kept}")


async def _index(
    settings: Settings, *, min_chunks: int, dry_run: bool, maintenance_work_mem: str | None
) -> list[tuple[str, str, str, str, str]]:
    from app.db.engine import create_engine, create_sessionmaker
    from app.db.indexes import maintain_dedicated_indexes

    assert settings.database_url is not None
    assert settings.migration_database_url is not None
    runtime = create_engine(settings.database_url.get_secret_value(), pool_size=1)
    try:
        changes = await maintain_dedicated_indexes(
            create_sessionmaker(runtime),
            settings.migration_database_url.get_secret_value(),
            min_chunks=min_chunks,
            build_memory_max_mb=settings.index_build_memory_max_mb,
            maintenance_work_mem=maintenance_work_mem,
            dry_run=dry_run,
        )
    finally:
        await runtime.dispose()
    return [
        (
            c.tenant_id,
            str(c.chunks),
            c.action,
            "" if c.seconds is None else f"{c.seconds:.1f}",
            c.memory or "",
        )
        for c in changes
    ]
