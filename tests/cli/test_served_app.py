"""`rag serve`'s app: start-up's objects frozen out of the collector's reach (app/cli/server.py)."""

from __future__ import annotations

import gc
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from app.cli.server import settled


@pytest.fixture
def unfrozen() -> Iterator[None]:
    gc.unfreeze()
    yield
    gc.unfreeze()  # this test process builds many apps: none of them is kept for good


def test_start_up_ends_with_its_objects_frozen_and_the_app_state_kept(unfrozen: None) -> None:
    seen: dict[str, int] = {}

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[dict[str, object]]:
        seen["during start-up"] = gc.get_freeze_count()
        yield {"resource": "open"}
        seen["closed"] = 1

    app = settled(FastAPI(lifespan=lifespan))

    @app.get("/state")
    async def state_of(request: Request) -> dict[str, object]:
        return {"frozen": gc.get_freeze_count(), "resource": request.state.resource}

    with TestClient(app) as client:
        reply = client.get("/state").json()
    assert seen["during start-up"] == 0
    assert reply["frozen"] > 1000  # the interpreter's and the app's objects
    assert reply["resource"] == "open"  # the lifespan's state still reaches requests
    assert seen["closed"] == 1
