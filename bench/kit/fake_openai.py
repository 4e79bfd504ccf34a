"""An OpenAI-compatible embeddings server on loopback, in its own process: POST /v1/embeddings
answers each input with a deterministic unit vector (seeded by the text's hash), so the
service's HTTP embedder can be measured without a model. Vectors come as base64 float32 when
the request asks for ``encoding_format: base64``, else as JSON numbers; under
``/floats/v1/embeddings`` always as numbers, like the compatible servers that ignore the
format asked for. `python -m bench.kit.fake_openai PORT DIMENSIONS` runs it;
`fake_openai(dimensions)` starts one and yields its base URL."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import numpy as np
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from bench.kit.paths import ROOT
from bench.kit.ports import free_port


def fake_vector(text: str, dimensions: int) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")
    vector = np.random.default_rng(seed).standard_normal(dimensions)
    rows: list[float] = (vector / np.linalg.norm(vector)).astype(np.float32).tolist()
    return rows


def encoded(vector: list[float], encoding_format: object) -> list[float] | str:
    if encoding_format != "base64":
        return vector
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode()


def app(dimensions: int) -> Starlette:
    async def answer(request: Request, *, floats_only: bool) -> Response:
        body = await request.json()
        inputs = body["input"]
        encoding_format = None if floats_only else body.get("encoding_format")
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": encoded(fake_vector(text, dimensions), encoding_format),
            }
            for i, text in enumerate(inputs)
        ]
        usage = {"prompt_tokens": len(inputs), "total_tokens": len(inputs)}
        reply = {"object": "list", "data": data, "model": body["model"], "usage": usage}
        return JSONResponse(reply)

    async def embeddings(request: Request) -> Response:
        return await answer(request, floats_only=False)

    async def floats(request: Request) -> Response:
        return await answer(request, floats_only=True)

    return Starlette(
        routes=[
            Route("/v1/embeddings", embeddings, methods=["POST"]),
            Route("/floats/v1/embeddings", floats, methods=["POST"]),
        ]
    )


@contextmanager
def fake_openai(dimensions: int) -> Iterator[str]:
    port = free_port()
    command = [sys.executable, "-m", "bench.kit.fake_openai", str(port), str(dimensions)]
    process = subprocess.Popen(command, cwd=ROOT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                body = {"input": ["ping"], "model": "ping"}
                if httpx.post(f"{url}/embeddings", json=body, timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the fake embeddings server did not start")
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(10)


if __name__ == "__main__":
    port, dimensions = int(sys.argv[1]), int(sys.argv[2])
    uvicorn.run(app(dimensions), host="127.0.0.1", port=port, log_level="warning")
