"""A fake OpenAI server on a local port (the real MiniLM model is the root `minilm` fixture)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Route

from tests.embeddings.fakes import FakeOpenAI


@pytest.fixture(scope="session")
def openai_server() -> Iterator[tuple[FakeOpenAI, str]]:
    """A uvicorn server in a thread, speaking the OpenAI embeddings wire format."""
    fake = FakeOpenAI()
    app = Starlette(routes=[Route("/v1/embeddings", fake.embeddings, methods=["POST"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            pytest.fail("the fake OpenAI server did not start")
        time.sleep(0.01)
    yield fake, f"http://127.0.0.1:{port}/v1"
    server.should_exit = True
    thread.join(5)
    sock.close()


@pytest.fixture
def fake_openai(openai_server: tuple[FakeOpenAI, str]) -> FakeOpenAI:
    fake, _ = openai_server
    fake.reset()
    return fake


@pytest.fixture
def openai_url(openai_server: tuple[FakeOpenAI, str]) -> str:
    return openai_server[1]


@pytest.fixture
def dead_url() -> str:
    """A local URL where nothing listens: connections are refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
