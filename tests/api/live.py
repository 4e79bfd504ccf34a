"""A real uvicorn server in a thread, on the test database, for clients that need a socket
(the browser, the schema-driven fuzzer). Unlike the ASGI fixtures, what it writes is
committed; each run uses tenants of its own."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import uvicorn
from sqlalchemy.ext.asyncio import async_sessionmaker

from app.api.examples import MARKDOWN_DOCUMENT
from app.api.http_protocol import uvicorn_config
from app.auth import issue_token
from app.db.engine import create_engine
from app.db.tenancy import registry_transaction
from app.main import create_app
from app.settings import Settings
from app.tenants import create_tenant
from tests.fakes import WordHashEmbedder
from tests.processes import free_port

ALL_SCOPES = ["rag:search", "rag:ingest", "rag:admin"]


@dataclass(frozen=True, slots=True)
class LiveServer:
    url: str
    tenant_id: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def in_thread(coro: Coroutine[Any, Any, None]) -> None:
    """Run `coro` on its own event loop (the caller's thread may hold pytest's)."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            asyncio.run(coro)
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]


async def _register(settings: Settings, tenant_id: str) -> None:
    assert settings.database_url is not None
    engine = create_engine(settings.database_url.get_secret_value(), pool_size=1)
    try:
        async with registry_transaction(async_sessionmaker(engine)) as session:
            await create_tenant(session, tenant_id, tier="enterprise")
    finally:
        await engine.dispose()


@contextmanager
def live_server(
    settings: Settings, *, embedder: WordHashEmbedder | None = None
) -> Iterator[LiveServer]:
    """The app on 127.0.0.1 with a fresh tenant holding the explorer's markdown example;
    `embedder` (by default a WordHashEmbedder) is the one it embeds with."""
    tiers = {"basic": 100, "pro": 1000, **settings.rate_limit_tiers, "enterprise": 1_000_000}
    settings = settings.model_copy(update={"rate_limit_tiers": tiers})
    tenant_id = f"t-live-{uuid.uuid4().hex[:10]}"
    in_thread(_register(settings, tenant_id))
    embedder = embedder or WordHashEmbedder(settings.embedding_dimensions)
    app = create_app(settings, embedder=embedder)
    port = free_port()
    config = uvicorn_config(
        app, settings, host="127.0.0.1", port=port, log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the live server did not start")
        time.sleep(0.05)
    token = issue_token(
        settings, tenant_id=tenant_id, subject="explorer", scopes=ALL_SCOPES, ttl_seconds=3600
    )
    live = LiveServer(url=f"http://127.0.0.1:{port}", tenant_id=tenant_id, token=token)
    reply = httpx.post(
        f"{live.url}/api/rag/documents", json=MARKDOWN_DOCUMENT, headers=live.headers, timeout=60
    )
    reply.raise_for_status()
    try:
        yield live
    finally:
        server.should_exit = True
        thread.join(30)
