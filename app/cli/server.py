"""Run the API under uvicorn and say, once it answers, where it is and how to get a token.

Stopping: Ctrl-C (SIGINT) or SIGTERM stops accepting connections and gives the requests in
flight RAG_SHUTDOWN_GRACE_SECONDS to finish (uvicorn's graceful shutdown; past it they are
cancelled), then the app's lifespan closes its resources, then the caller stops the embedded
database. A second Ctrl-C stops at once: requests in flight are cancelled, the lifespan's
shutdown is skipped, and the embedded database is still stopped. SIGTERM is Ctrl-C from
start to end (`stop_on_sigterm`), with one worker or several: the exit status is 0.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import socket
from collections.abc import AsyncIterator
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI
from uvicorn.supervisors import Multiprocess

from app.api.http_protocol import uvicorn_config
from app.auth.keys import hmac_key_source
from app.cli.listening import PORT_SHARING, PortReservation, is_ipv6
from app.cli.options import fail
from app.embeddings.onnx_model import available_cores
from app.main import create_app
from app.observability.exposition import shared_between_workers
from app.settings import Settings

_log = logging.getLogger("app.serve")


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that logs one line when it is ready to answer, and says what it does
    when it is asked to stop."""

    def __init__(self, config: uvicorn.Config, *, base_url: str, keys: str | None) -> None:
        super().__init__(config)
        self._base_url, self._keys = base_url, keys

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            _log.info(
                "ready on %s (explorer: %s/docs; console: %s/console; a token: rag token"
                " --tenant ID; Ctrl-C stops)",
                self._base_url,
                self._base_url,
                self._base_url,
            )
            if self._keys is not None:
                _log.info("tokens: HMAC secret in %s", self._keys)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            _log.warning("stopping at once: requests in flight are cancelled")
        elif not self.should_exit:
            _log.info(
                "stopping: %d request(s) in flight get up to %s s to finish (Ctrl-C again: "
                "stop at once)",
                len(self.server_state.tasks),
                self.config.timeout_graceful_shutdown,
            )
        super().handle_exit(sig, frame)


class _Supervisor(Multiprocess):
    """uvicorn's supervisor of worker processes, where a second Ctrl-C sent to this process
    alone (not to its process group, as a terminal does) reaches the workers too: a worker
    shutting down gracefully stops at once on a second SIGINT."""

    def join_all(self) -> None:
        for process in self.processes:
            while process.process.is_alive():
                process.process.join(0.2)
                if signal.SIGINT in self.signal_queue:
                    self.signal_queue.clear()
                    _log.warning("stopping at once: requests in flight are cancelled")
                    for each in self.processes:
                        if each.pid is not None and each.process.is_alive():
                            os.kill(each.pid, signal.SIGINT)


def stop_on_sigterm() -> None:
    """From now on SIGTERM (systemd, `kill`, `docker stop`) stops this process as Ctrl-C does:
    a KeyboardInterrupt, so every `finally` runs and the embedded database is stopped. Python's
    own SIGTERM ends the process on the spot, and uvicorn raises the signal it handled again
    once its graceful shutdown is done: `rag serve` exited 143 with PostgreSQL still running."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)


def run_server(
    settings: Settings,
    *,
    host: str,
    port: int,
    workers: int = 1,
    log_config: dict[str, Any] | None = None,
) -> None:
    """Serve until interrupted. `log_config` (a dictConfig dictionary, app/observability/logs.py)
    is applied again by uvicorn in each worker process. With `workers` > 1, uvicorn's
    supervisor runs that many processes, each listening on the port with a socket of its own
    (app/cli/listening.py), each building the app from the
    environment this process hands down (the database it started), their metrics shared
    through files (prometheus_client's multiprocess mode)."""
    shown = f"[{host}]" if is_ipv6(host) else host
    base_url = f"http://{shown}:{port}"
    keys = hmac_key_source(settings)
    options: dict[str, Any] = {"host": host, "port": port, "log_config": log_config}
    if workers > 1:
        _hand_down(settings, workers)
        with shared_between_workers():
            config = uvicorn_config(
                "app.cli.server:served_app", settings, factory=True, workers=workers, **options
            )
            _log.info(
                "serving on %s with %d worker processes (each loads the model: ready when "
                "%s/readyz answers 200; Ctrl-C stops)",
                base_url,
                workers,
                base_url,
            )
            if keys is not None:
                _log.info("tokens: HMAC secret in %s", keys)
            _supervise(config, host=host, port=port)
    else:
        config = uvicorn_config(settled(create_app(settings)), settings, **options)
        _run(_AnnouncingServer(config, base_url=base_url, keys=keys).run)
    _log.info("stopped")


def served_app() -> FastAPI:
    """The app each worker process of `rag serve --workers N` builds (uvicorn's factory), from
    the environment the supervisor handed down."""
    return settled(create_app())


def settled(app: FastAPI) -> FastAPI:
    """`app` whose start-up ends with its objects out of the garbage collector's reach
    (`gc.freeze`): the model's Python side, the routes and the schemas, ~350,000 objects that
    every full collection walked. Measured in a worker under load (gc.callbacks, `python -m
    bench.saturation --workload abstracts --clients 16`): full collections of 140-300 ms,
    one every ~40 s, stalling every request of that worker; after the freeze, 14 ms. What
    requests allocate is collected as before. `rag serve` only: a process that builds many
    apps (the tests) would keep each one's start-up for good."""
    started = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(served: FastAPI) -> AsyncIterator[Any]:
        async with started(served) as state:
            gc.collect()
            gc.freeze()
            yield state

    app.router.lifespan_context = lifespan
    return app


def _supervise(config: uvicorn.Config, *, host: str, port: int) -> None:
    """The workers under uvicorn's supervisor, each on a socket of its own where the system
    can share a port (app/cli/listening.py), else on the supervisor's one socket."""
    if not PORT_SHARING:
        _run(_Supervisor(config, sockets=[config.bind_socket()]).run)
        return
    try:
        reservation = PortReservation(host, port)
    except OSError as error:
        fail(f"cannot listen on {host}:{port}: {error.strerror or error}")
    with reservation:
        _run(_Supervisor(config, sockets=reservation.worker_sockets()).run)


def _run(run: Any) -> None:
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the Ctrl-C it handled
        run()


def _hand_down(settings: Settings, workers: int) -> None:
    """What the worker processes need and cannot find on their own: the database this process
    resolved (embedded, started once), the token secret, and how many share the rate limit."""
    if settings.database_url is not None:
        os.environ["RAG_DATABASE_URL"] = settings.database_url.get_secret_value()
    if settings.jwt_secret is not None:
        os.environ["RAG_JWT_SECRET"] = settings.jwt_secret.get_secret_value()
    if settings.migration_database_url is not None:  # the index upkeep (app/db/autoindex.py)
        os.environ["RAG_MIGRATION_DATABASE_URL"] = (
            settings.migration_database_url.get_secret_value()
        )
    os.environ.setdefault("RAG_RATE_LIMIT_INSTANCES", str(workers))


def default_workers(settings: Settings) -> int:
    """One process per core when Redis holds the rate limit (the limit stays exact across
    them); one process without it, where each process would admit only its share."""
    return available_cores() if settings.redis_url is not None else 1
