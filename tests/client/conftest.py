"""A live service for the Python client and the remote CLI: uvicorn on a real port, in a thread,
over a database of its own (its data is committed, so it stays out of the other tests' way)."""

from __future__ import annotations

import asyncio
import base64
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import uvicorn
from pydantic import SecretStr

from app.db.embedded import drop_database
from app.db.engine import create_engine, create_sessionmaker
from app.db.tenancy import registry_transaction
from app.main import create_app
from app.settings import Settings
from app.tenants import create_tenant
from tests.conftest import DIMENSIONS, DatabaseUrls, fresh_database
from tests.conftest import token_for as _token_for
from tests.fakes import WordHashEmbedder

TINY_TIER = "tiny"  # 2 requests per 2-second window: 429s come quickly and pass quickly
WINDOW_SECONDS = 2
UPLOAD_MAX_BYTES = 64 * 1024
ADMIN_SCOPES = "rag:search rag:ingest rag:admin"
WEBHOOK_SECRET = "whsec_" + base64.b64encode(b"the live service's webhook key!!").decode()


@dataclass(frozen=True, slots=True)
class LiveService:
    url: str
    settings: Settings
    app_url: str

    def tenant(self, *, tier: str = "basic", prefix: str = "c") -> str:
        """A new tenant, committed; its id."""
        tenant_id = f"{prefix}-{uuid.uuid4().hex[:12]}"
        # a thread of its own: async tests call this with their event loop running
        worker = threading.Thread(
            target=asyncio.run, args=(_register(self.app_url, tenant_id, tier),)
        )
        worker.start()
        worker.join(60)
        return tenant_id

    def token(self, tenant_id: str, scopes: str = "rag:search rag:ingest") -> str:
        return _token_for(self.settings, tenant_id, scopes)


async def _register(app_url: str, tenant_id: str, tier: str) -> None:
    engine = create_engine(app_url, pool_size=1)
    try:
        async with registry_transaction(create_sessionmaker(engine)) as session:
            await create_tenant(session, tenant_id, tier=tier)
    finally:
        await engine.dispose()


@dataclass(slots=True)
class ThreadedServer:
    server: uvicorn.Server
    thread: threading.Thread
    sock: socket.socket

    @property
    def url(self) -> str:
        host, port = self.sock.getsockname()
        return f"http://{host}:{port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.sock.close()


def serve_in_thread(settings: Settings) -> ThreadedServer:
    """The app with the offline embedder, served by uvicorn on a free loopback port."""
    app = create_app(settings, embedder=WordHashEmbedder(DIMENSIONS))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            server.should_exit = True
            pytest.fail("the live service did not start")
        time.sleep(0.02)
    return ThreadedServer(server, thread, sock)


@pytest.fixture(scope="session")
def live(database: DatabaseUrls, settings: Settings) -> Iterator[LiveService]:
    name = f"rag_client_{os.getpid()}"
    app_url = asyncio.run(fresh_database(database, name))
    tiers = {**settings.rate_limit_tiers, TINY_TIER: 2}
    served = settings.model_copy(
        update={
            "database_url": SecretStr(app_url),
            "rate_limit_tiers": tiers,
            "rate_limit_window_seconds": WINDOW_SECONDS,
            "upload_max_bytes": UPLOAD_MAX_BYTES,
            "tenant_cache_seconds": 0.0,
            "job_workers": 1,  # the client's jobs (test_jobs.py) are run by the service
            # job callbacks to a receiver on loopback (test_jobs.py, test_cli_remote.py)
            "webhook_secret": SecretStr(WEBHOOK_SECRET),
            "webhook_allowed_hosts": ["127.0.0.1"],
            "webhook_retry_base_seconds": 0.2,
        }
    )
    running = serve_in_thread(served)
    try:
        yield LiveService(running.url, served, app_url)
    finally:
        running.stop()
        asyncio.run(drop_database(database.superuser_url, name))
