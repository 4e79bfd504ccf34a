"""A fake OpenAI server on a local port (the real MiniLM model is the root `minilm` fixture),
and a tiny sentence model to export to ONNX."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.routing import Route

from app.embeddings.local import default_model_path
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


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, 32-wide BERT sentence model with random weights and MiniLM's tokenizer.

    Built offline in a second; exporting it takes a second too, where the real model takes
    10-60 s: the export's mechanics (once, reuse, damage, locks) are tested on it.
    """
    torch = pytest.importorskip("torch")
    from sentence_transformers import SentenceTransformer
    from transformers import AutoTokenizer, BertConfig, BertModel

    try:
        from sentence_transformers.sentence_transformer.modules import (
            Normalize,
            Pooling,
            Transformer,
        )
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers.models import (  # type: ignore[no-redef]
            Normalize,
            Pooling,
            Transformer,
        )

    root = tmp_path_factory.mktemp("tiny-model")
    hf_dir = root / "hf"
    torch.manual_seed(0)
    config = BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64
    )
    BertModel(config).save_pretrained(hf_dir)
    AutoTokenizer.from_pretrained(str(default_model_path())).save_pretrained(hf_dir)
    modules = [Transformer(str(hf_dir), max_seq_length=64), Pooling(32, "mean"), Normalize()]
    model_dir = root / "tiny-minilm"
    SentenceTransformer(modules=modules).save(str(model_dir))
    return model_dir
