"""Run the API under uvicorn and say, once it answers, where it is and how to get a token."""

from __future__ import annotations

import contextlib
import logging
import socket

import uvicorn

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


def run_server(settings: Settings, *, host: str, port: int) -> None:
    """Serve until interrupted; uvicorn's own start-up lines stay at debug level."""
    errors = logging.getLogger("uvicorn.error")
    level = errors.level
    config = uvicorn_config(create_app(settings), settings, host=host, port=port, log_level="info")
    errors.setLevel(level)  # uvicorn.Config reconfigures its loggers: keep the chosen level
    shown = f"[{host}]" if ":" in host else host
    keys = hmac_key_source(settings)
    server = _AnnouncingServer(config, base_url=f"http://{shown}:{port}", keys=keys)
    with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the Ctrl-C it handled
        server.run()
    _log.info("stopped")
