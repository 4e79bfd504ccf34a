"""Fixtures of the HTTP tests that need a real socket."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.settings import Settings
from tests.api.live import LiveServer, live_server


@pytest.fixture(scope="session")
def live(settings: Settings) -> Iterator[LiveServer]:
    with live_server(settings) as server:
        yield server
