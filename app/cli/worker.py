"""`rag worker`: ingestion-job workers against the configured database (scale out)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from app.settings import Settings


def worker(
    concurrency: Annotated[
        int | None, typer.Option(help="Turns run at once (default RAG_JOB_WORKERS).", min=1)
    ] = None,
    nice: Annotated[
        int, typer.Option(help="Lower this process's CPU priority by this much (0-19).")
    ] = 0,
) -> None:
    """Run ingestion-job workers; start several, on any machine that reaches the database."""
    from app.cli.database import database_settings
    from app.cli.settings import load_settings, require_embedder

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if nice:
        os.nice(min(max(nice, 0), 19))
    loaded = load_settings()
    require_embedder(loaded, command="rag worker")
    with database_settings(loaded) as settings:
        typer.echo("job worker started", err=True)
        asyncio.run(_work(settings, concurrency or max(settings.job_workers, 1)))


async def _work(settings: Settings, concurrency: int) -> None:
    from app.cli.services import open_services
    from app.jobs.queue import Turns, run_workers, stop_workers
    from app.jobs.runner import JobServices

    async with open_services(settings, tenant_id=None) as services:
        jobs = JobServices(
            sessions=services.sessions,
            embedder=services.embedder,
            chunker=services.chunker,
            parser=services.parser,
            turn_documents=settings.job_turn_documents,
            settings=settings,
        )
        turns = Turns()
        task = asyncio.create_task(
            run_workers(settings, jobs, concurrency=concurrency, turns=turns)
        )
        asked = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, asked.set)
        asked_to_stop = asyncio.create_task(asked.wait())
        await asyncio.wait({task, asked_to_stop}, return_when=asyncio.FIRST_COMPLETED)
        asked_to_stop.cancel()
        if error := await stop_workers(task, settings=settings, turns=turns):
            raise error
