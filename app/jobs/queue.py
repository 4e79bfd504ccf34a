"""The job queue: procrastinate on the service's own PostgreSQL (no other server).

`run_workers` runs `concurrency` workers in this process until cancelled, plus the sweeper:
a job whose worker stopped sending heartbeats (kill -9, machine lost) goes back to the queue
and another worker finishes it. The same workers deliver the jobs' callbacks (callbacks.py).
`stop_workers` cancels them, whatever moment it comes at: turns in flight get the heartbeat
interval to finish; with none in flight the workers are stopped within about a second, even
when the database is down (procrastinate's own shutdown would wait for a connection)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import procrastinate
from procrastinate import JobContext, RetryStrategy
from sqlalchemy.engine import make_url

from app.jobs.callbacks import CALLBACK_QUEUE, CALLBACK_TASK, CallbackPolicy
from app.jobs.deliveries import deliver_callback
from app.jobs.runner import JobServices, fail_job, run_turn
from app.jobs.store import QUEUE, TASK
from app.settings import Settings

_log = logging.getLogger(__name__)
MAX_ATTEMPTS = 8
# An attempt that raised runs again after 1, 2, 3 ... seconds: 450 runs span 28 hours, so a
# callback outlives a database outage as long as its own retry window.
CALLBACK_TASK_RETRY = RetryStrategy(max_attempts=450, wait=1, linear_wait=1)


def conninfo(database_url: str) -> str:
    """libpq form of the service's URL (procrastinate talks psycopg, the service asyncpg)."""
    url = make_url(database_url.replace("postgres://", "postgresql://", 1))
    return url.set(drivername="postgresql").render_as_string(hide_password=False)


@dataclass(slots=True)
class Turns:
    """How many tasks (job turns, callback attempts) the workers are running now."""

    in_flight: int = 0

    @contextmanager
    def running(self) -> Iterator[None]:
        self.in_flight += 1
        try:
            yield
        finally:
            self.in_flight -= 1


def build_queue(
    settings: Settings, services: JobServices, turns: Turns | None = None
) -> procrastinate.App:
    turns = turns or Turns()
    assert settings.database_url is not None
    connector = procrastinate.PsycopgConnector(
        conninfo=conninfo(settings.database_url.get_secret_value()),
        kwargs={"application_name": "rag-jobs"},
        min_size=1,
        max_size=services_pool_size(settings),
    )
    queue = procrastinate.App(connector=connector)
    retry = RetryStrategy(max_attempts=MAX_ATTEMPTS, exponential_wait=2)

    @queue.task(name=TASK, queue=QUEUE, pass_context=True, retry=retry)
    async def ingest_turn(context: JobContext, job_id: str, tenant_id: str) -> None:
        try:
            with turns.running():
                await run_turn(services, job_id=uuid.UUID(job_id), tenant_id=tenant_id)
        except Exception as error:
            attempts = context.job.attempts if context.job else 0
            if attempts + 1 >= MAX_ATTEMPTS:
                await fail_job(
                    services.sessions,
                    job_id=uuid.UUID(job_id),
                    tenant_id=tenant_id,
                    error=f"gave up after {MAX_ATTEMPTS} attempts: {error}",
                )
            raise

    policy = CallbackPolicy.of(settings)

    # A failed attempt queues the next itself (callbacks.py): procrastinate retries only an
    # attempt that raised (the database was unreachable, the worker was stopped), and the
    # sweeper one whose worker died.
    @queue.task(name=CALLBACK_TASK, queue=CALLBACK_QUEUE, retry=CALLBACK_TASK_RETRY)
    async def deliver_callback_task(job_id: str, tenant_id: str, attempt: int) -> None:
        with turns.running():
            await deliver_callback(
                services.sessions,
                policy,
                job_id=uuid.UUID(job_id),
                tenant_id=tenant_id,
                attempt=attempt,
            )

    return queue


# A job's next turn is queued while the current turn still holds the job's lock, so its NOTIFY
# finds no free job and the worker waits for the next poll: procrastinate's default 5 s made a
# one-worker job ingest at a tenth of the synchronous rate. One cheap query per half second.
FETCH_POLL_SECONDS = 0.5


async def run_workers(
    settings: Settings, services: JobServices, *, concurrency: int, turns: Turns | None = None
) -> None:
    """Work the queue until cancelled: `concurrency` turns at a time (counted in `turns`), and
    the sweeper."""
    queue = build_queue(settings, services, turns)
    try:
        async with queue.open_async():
            sweeper = asyncio.create_task(_sweep(queue, settings))
            try:
                await queue.run_worker_async(
                    queues=[QUEUE, CALLBACK_QUEUE],
                    concurrency=concurrency,
                    wait=True,
                    install_signal_handlers=False,
                    update_heartbeat_interval=settings.job_heartbeat_seconds,
                    stalled_worker_timeout=settings.job_stalled_seconds,
                    shutdown_graceful_timeout=settings.job_heartbeat_seconds,
                    fetch_job_polling_interval=FETCH_POLL_SECONDS,
                )
            finally:
                sweeper.cancel()
                await asyncio.gather(sweeper, return_exceptions=True)
    finally:
        # Cancelled while the pool was still opening, `open_async` never returned, so its
        # block never closed the pool: close it here (a no-op when the block did).
        await queue.connector.close_async()


# A cancel can be swallowed on its way into procrastinate's worker (seen while it prunes
# stalled workers at start, and once a second after start): the worker then runs on, idle, and
# its task never ends. And once cancelled, its shutdown unregisters it in the database, which
# waits up to 30 s for a connection when the database is down. `stop_workers` sends the cancel
# again every STOP_STEP_SECONDS while no turn is in flight; while one is, once the graceful
# shutdown's own bound (`shutdown_graceful_timeout`, the heartbeat interval) and this margin
# have passed.
CANCEL_AGAIN_MARGIN_SECONDS = 5.0
STOP_STEP_SECONDS = 1.0


async def stop_workers(
    task: asyncio.Task[None], *, settings: Settings, turns: Turns | None = None
) -> BaseException | None:
    """Cancel `run_workers`' task and wait until it has ended; what it ended with, when that
    is an error of its own rather than the cancel. `turns` (those `run_workers` counted): with
    none in flight it is cancelled again each second; without `turns` every turn is assumed
    in flight."""
    graceful = settings.job_heartbeat_seconds + CANCEL_AGAIN_MARGIN_SECONDS
    loop = asyncio.get_running_loop()
    task.cancel()
    cancelled_at = loop.time()
    while not task.done():
        await asyncio.wait({task}, timeout=STOP_STEP_SECONDS)
        busy = turns is None or turns.in_flight > 0
        if not task.done() and (not busy or loop.time() - cancelled_at >= graceful):
            task.cancel()
            cancelled_at = loop.time()
    if task.cancelled():
        return None
    return task.exception()


async def _sweep(queue: procrastinate.App, settings: Settings) -> None:
    """Every heartbeat interval, put the turns of silent workers back in the queue."""
    while True:
        await asyncio.sleep(settings.job_heartbeat_seconds)
        try:
            await requeue_stalled(queue, stalled_seconds=settings.job_stalled_seconds)
        except Exception:
            _log.exception("job sweeper failed; trying again")


async def requeue_stalled(queue: procrastinate.App, *, stalled_seconds: float) -> list[Any]:
    stalled = [
        job
        for name in (QUEUE, CALLBACK_QUEUE)
        for job in await queue.job_manager.get_stalled_jobs(
            queue=name, seconds_since_heartbeat=stalled_seconds
        )
    ]
    for job in stalled:
        _log.warning("job turn %s lost its worker; queued again", job.id)
        await queue.job_manager.retry_job(job)
    return stalled


def services_pool_size(settings: Settings) -> int:
    return max(settings.job_workers, 1) + 3  # turns, the listener, the heartbeat, the sweeper


@asynccontextmanager
async def background_workers(
    settings: Settings, services: JobServices, *, concurrency: int
) -> AsyncIterator[None]:
    """In-process workers for the duration of the block (`rag serve`); none for 0."""
    if concurrency <= 0:
        yield
        return
    turns = Turns()
    task = asyncio.create_task(
        run_workers(settings, services, concurrency=concurrency, turns=turns)
    )
    try:
        yield
    finally:
        if error := await stop_workers(task, settings=settings, turns=turns):
            _log.error("job workers had stopped on an error", exc_info=error)
