"""`rag index`: dedicated HNSW indexes for large tenants (see app/db/indexes.py)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from app.settings import Settings


def index(
    min_chunks: Annotated[
        int | None,
        typer.Option(min=1, help="Tenants with this many chunks get their own index."),
    ] = None,
    dry_run: Annotated[bool, typer.Option(help="Show what would change; change nothing.")] = False,
    maintenance_work_mem: Annotated[
        str, typer.Option(help="For the index builds (the graph is built in memory).")
    ] = "256MB",
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
    for name in ("tenant", "chunks", "action", "seconds"):
        table.add_column(name, justify="right" if name in {"chunks", "seconds"} else "left")
    for row in rows:
        table.add_row(*row)
    if rows:
        Console().print(table)
    if all(action == "kept" for _, _, action, _ in rows):
        kept = f" ({len(rows)} dedicated indexes kept)" if rows else ""
        Console().print(f"nothing to do: no tenant crossed {threshold} chunks either way{kept}")


async def _index(
    settings: Settings, *, min_chunks: int, dry_run: bool, maintenance_work_mem: str
) -> list[tuple[str, str, str, str]]:
    from app.db.engine import create_engine, create_sessionmaker
    from app.db.indexes import (
        chunk_counts,
        create_dedicated_index,
        dedicated_indexes,
        drop_dedicated_index,
        index_connection,
        plan_indexes,
    )

    assert settings.database_url is not None
    assert settings.migration_database_url is not None
    runtime = create_engine(settings.database_url.get_secret_value(), pool_size=1)
    owner_url = settings.migration_database_url.get_secret_value()
    rows: list[tuple[str, str, str, str]] = []
    try:
        counts = await chunk_counts(create_sessionmaker(runtime))
        async with index_connection(owner_url, maintenance_work_mem=maintenance_work_mem) as conn:
            plan = plan_indexes(counts, await dedicated_indexes(conn), min_chunks=min_chunks)
            for index in plan.keep:
                rows.append((index.tenant_id, str(counts.get(index.tenant_id, 0)), "kept", ""))
            for index in plan.drop:
                began = time.perf_counter()
                if not dry_run:
                    await drop_dedicated_index(conn, index)
                action = "dropped" if index.valid else "dropped (failed build)"
                rows.append(
                    (index.tenant_id, str(counts.get(index.tenant_id, 0)), action, _since(began))
                )
            for tenant_id in plan.create:
                began = time.perf_counter()
                if not dry_run:
                    await create_dedicated_index(conn, tenant_id)
                rows.append((tenant_id, str(counts[tenant_id]), "created", _since(began)))
    finally:
        await runtime.dispose()
    if dry_run:
        rows = [(t, c, a if a == "kept" else f"would be {a}", "") for t, c, a, _ in rows]
    return rows


def _since(began: float) -> str:
    return f"{time.perf_counter() - began:.1f}"
