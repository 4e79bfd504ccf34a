"""An app whose lifespan has ended is freed with everything it held: nothing global (FastAPI's
caches of dependency callables among them) keeps a reference to it. Tests build hundreds of
apps in one process; a service that builds one per worker must not hold an old one either."""

from __future__ import annotations

import gc
import weakref

from app.db.tenancy import SessionMaker
from app.settings import Settings
from tests.conftest import app_client
from tests.fakes import WordHashEmbedder


async def test_an_app_that_served_requests_is_freed_after_its_lifespan(
    settings: Settings, sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    apps = []
    for _ in range(2):
        async with app_client(settings, sessions, embedder) as http:
            for path in ("/docs", "/redoc", "/healthz", "/openapi.json", "/api/rag/documents"):
                await http.get(path)
            apps.append(weakref.ref(http._transport.app))  # type: ignore[attr-defined]
    del http
    gc.collect()
    assert [ref() for ref in apps] == [None, None]
