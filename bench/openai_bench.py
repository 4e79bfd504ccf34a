"""The OpenAI embedder's CPU per vector, on the event loop and in all, for replies of JSON
numbers and of base64, one query vector and a batch.

    python -m bench.openai_bench [--dimensions 1536 384] [--batches 1 64] [--calls 40]
        [--rounds 3] [--inline-max-bytes N] [--json OUT]

A loopback OpenAI-compatible server (bench/kit/fake_openai.py, in its own process) answers;
the client makes one call at a time on one event loop in this process. The paths:

- sdk float: the SDK's parsed reply to ``encoding_format="float"``, then a float64 array from
  its lists of floats, normalised, as lists: the embedder's default path before base64;
- sdk base64: the same with the format left to the SDK, which asks for base64 and decodes it
  (the embedder's ``encoding_format="base64"`` before it read the raw reply);
- embedder float / embedder base64: ``OpenAIEmbedder.embed_documents`` with that format;
- embedder base64, server answers floats: the same, from a server that ignores the format.

Per path, medians over the rounds (the paths take turns in each round): CPU of the event
loop's thread per call (``time.thread_time``: while it runs, no other request on that loop
moves), CPU of the whole process per call (worker threads included: what moving work off the
loop costs in all), wall time per call (median), and, in a second pass with a 1 ms ticker on
the loop, the longest the loop went without running the ticker during a call (median over
``--calls // 4`` calls; the ticker's own 1 ms subtracted). ``--inline-max-bytes`` replaces
``openai_reply.INLINE_MAX_BYTES``, the largest reply the embedder reads on the event loop (0:
every reply in a worker thread), to measure where that line should be.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Literal

import anyio
import numpy as np
from openai import AsyncOpenAI, Omit, omit
from openai.types import CreateEmbeddingResponse

from app.embeddings import openai_reply
from app.embeddings.openai_provider import OpenAIEmbedder, RetryPolicy
from bench.kit.fake_openai import fake_openai
from bench.kit.report import log, print_table, write_json

Call = Callable[[list[str]], Awaitable[list[list[float]]]]
MODEL = "text-embedding-3-small"
TICK = 0.001


@dataclass(slots=True)
class Sample:
    path: str
    dimensions: int
    batch: int
    loop_cpu_ms: list[float] = field(default_factory=list)
    process_cpu_ms: list[float] = field(default_factory=list)
    wall_ms: list[float] = field(default_factory=list)
    stall_ms: list[float] = field(default_factory=list)


def rows_from(response: CreateEmbeddingResponse) -> list[list[float]]:
    """What the embedder did with the SDK's parsed reply before it read the raw one."""
    data = sorted(response.data, key=lambda item: item.index)
    array = np.asarray([item.embedding for item in data], dtype=np.float64)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    rows: list[list[float]] = (array / np.where(norms == 0, 1.0, norms)).tolist()
    return rows


def sdk_call(client: AsyncOpenAI, encoding_format: Literal["float"] | Omit) -> Call:
    async def call(texts: list[str]) -> list[list[float]]:
        response = await client.embeddings.create(
            input=texts, model=MODEL, encoding_format=encoding_format
        )
        return rows_from(response)

    return call


def embedder(client: AsyncOpenAI, dimensions: int, encoding_format: str) -> OpenAIEmbedder:
    return OpenAIEmbedder(
        client,
        model=MODEL,
        dimensions=dimensions,
        retry=RetryPolicy(attempts=1),
        send_dimensions=False,
        encoding_format="float" if encoding_format == "float" else "base64",
    )


async def measure(call: Call, texts: list[str], sample: Sample, calls: int) -> None:
    for _ in range(3):
        await call(texts)
    walls: list[float] = []
    cpu, process = time.thread_time(), time.process_time()
    for _ in range(calls):
        started = time.perf_counter()
        await call(texts)
        walls.append(time.perf_counter() - started)
    sample.loop_cpu_ms.append((time.thread_time() - cpu) / calls * 1000)
    sample.process_cpu_ms.append((time.process_time() - process) / calls * 1000)
    sample.wall_ms.append(statistics.median(walls) * 1000)


async def longest_stall(call: Call, texts: list[str]) -> float:
    """Milliseconds the loop went without a turn for the ticker, at worst, during one call."""
    worst = 0.0
    done = anyio.Event()

    async def tick() -> None:
        nonlocal worst
        last = time.perf_counter()
        while not done.is_set():
            await anyio.sleep(TICK)
            now = time.perf_counter()
            worst, last = max(worst, now - last - TICK), now

    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        await anyio.sleep(TICK * 2)
        await call(texts)
        done.set()
    return worst * 1000


async def run_dimensions(
    base_url: str, dimensions: int, args: argparse.Namespace, samples: list[Sample]
) -> None:
    floats_url = base_url.removesuffix("/v1") + "/floats/v1"
    clients = [
        AsyncOpenAI(api_key="bench", base_url=url, max_retries=0) for url in (base_url, floats_url)
    ]
    plain, floats_only = clients
    paths: dict[str, Call] = {
        "sdk float": sdk_call(plain, "float"),
        "sdk base64": sdk_call(plain, omit),
        "embedder float": embedder(plain, dimensions, "float").embed_documents,
        "embedder base64": embedder(plain, dimensions, "base64").embed_documents,
        "embedder base64, server answers floats": embedder(
            floats_only, dimensions, "base64"
        ).embed_documents,
    }
    try:
        for batch in args.batches:
            texts = [f"text {i} of a batch of {batch}" for i in range(batch)]
            mine = [Sample(path, dimensions, batch) for path in paths]
            for round_number in range(args.rounds):
                for sample, call in zip(mine, paths.values(), strict=True):
                    await measure(call, texts, sample, args.calls)
                    for _ in range(max(1, args.calls // 4)):
                        sample.stall_ms.append(await longest_stall(call, texts))
                log(f"{dimensions} dimensions, batch {batch}: round {round_number + 1} done")
            samples.extend(mine)
    finally:
        for client in clients:
            await client.close()


def table(samples: list[Sample]) -> list[list[object]]:
    rows: list[list[object]] = []
    for s in samples:
        loop_ms = statistics.median(s.loop_cpu_ms)
        process_ms = statistics.median(s.process_cpu_ms)
        rows.append(
            [
                s.path,
                s.dimensions,
                s.batch,
                loop_ms,
                loop_ms / s.batch,
                process_ms,
                process_ms / s.batch,
                statistics.median(s.wall_ms),
                statistics.median(s.stall_ms),
            ]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--dimensions", type=int, nargs="+", default=[1536, 384])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--calls", type=int, default=40, help="per path, batch and round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--inline-max-bytes", type=int, default=openai_reply.INLINE_MAX_BYTES)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    openai_reply.INLINE_MAX_BYTES = args.inline_max_bytes

    samples: list[Sample] = []
    for dimensions in args.dimensions:
        with fake_openai(dimensions) as url:
            anyio.run(run_dimensions, url, dimensions, args, samples)
    header = [
        "path",
        "dims",
        "batch",
        "loop CPU ms/call",
        "loop CPU ms/vector",
        "process CPU ms/call",
        "process CPU ms/vector",
        "wall ms/call",
        "longest loop stall ms",
    ]
    title = "OpenAI embedder, loopback server, one call at a time"
    title += f"; replies read on the event loop up to {args.inline_max_bytes:,} bytes"
    print_table(title, header, table(samples))
    payload = {"args": vars(args), "samples": [asdict(s) for s in samples]}
    path = write_json("openai_bench", payload)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(path.read_text())


if __name__ == "__main__":
    main()
