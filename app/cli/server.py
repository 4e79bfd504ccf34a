"""Run the API under uvicorn and say, once it answers, where it is and how to get a token."""

from __future__ import annotations

import contextlib
import logging
import os
import socket

import uvicorn
from uvicorn.supervisors import Multiprocess

from app.api.http_protocol import uvicorn_config
from app.auth.keys import hmac_key_source
from app.main import create_app
from app.settings import Settings

_log = logging.getLogger("app.serve")


class _AnnouncingServer(uvicorn.Server):
    """A uvicorn server that logs one line when it is ready to answer."""

    def __init__(self, config: uvicorn.Config, *, base_url: str, keys: str | None) -> None:
        super().__init__(config)
        self._base_url, self._keys = base_url, keys

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        if self.started:
            _log.info(
                "ready on %s (explorer: %s/docs; a token: rag token --tenant ID; Ctrl-C stops)",
                self._base_url,
                self._base_url,
            )
            if self._keys is not None:
                _log.info("tokens: HMAC secret in %s", self._keys)


def run_server(settings: Settings, *, host: str, port: int, workers: int = 1) -> None:
    """Serve until interrupted; uvicorn's own start-up lines stay at debug level. With
    `workers` > 1, uvicorn's supervisor runs that many processes on one socket, each building
    the app from the environment this process hands down (the database it started)."""
    errors = logging.getLogger("uvicorn.error")
    level = errors.level
    shown = f"[{host}]" if ":" in host else host
    base_url = f"http://{shown}:{port}"
    keys = hmac_key_source(settings)
    if workers > 1:
        _hand_down(settings, workers)
        config = uvicorn_config(
            "app.main:create_app",
            settings,
            factory=True,
            workers=workers,
            host=host,
            port=port,
            log_level="info",
        )
        errors.setLevel(level)  # uvicorn.Config reconfigures its loggers: keep the chosen level
        _log.info(
            "serving on %s with %d worker processes (each loads the model: ready when %s/readyz "
            "answers 200; Ctrl-C stops)",
            base_url,
            workers,
            base_url,
        )
        if keys is not None:
            _log.info("tokens: HMAC secret in %s", keys)
        run = Multiprocess(config, sockets=[config.bind_socket()]).run
    else:
        config = uvicorn_config(
            create_app(settings), settings, host=host, port=port, log_level="info"
        )
        errors.setLevel(level)
        run = _AnnouncingServer(config, base_url=base_url, keys=keys).run
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the Ctrl-C it handled
        run()
    _log.info("stopped")


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
