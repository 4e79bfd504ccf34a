"""Queries embedded together: those that arrive while an inference runs go into the next one.

A process runs one query inference at a time (the local embedder's query lane), so under load
queries wait for it anyway; the next inference then takes every query waiting, up to
`max_batch`, instead of one. A batch costs less CPU per text than single calls (20-word queries
on two cores: ~10 ms a text in batches of 4 against ~14 ms one by one, `python -m
bench.saturation --workload abstracts`, "Measured alone"), and a query that finds nothing
running waits for nothing more than before: there is no timer.

A caller that goes away (its request cancelled) is left out of the batch not yet begun; one
whose batch is running when it goes leaves the others' results to them: the batch's other
queries go back to the head of the queue and the next caller in line runs them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

Vector = list[float]
Encode = Callable[[list[str]], Awaitable[list[Vector]]]


class QueryBatcher:
    def __init__(self, encode: Encode, *, max_batch: int) -> None:
        self._encode = encode
        self._max_batch = max_batch
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiting: list[tuple[str, asyncio.Future[Vector]]] = []
        self._turn = asyncio.Lock()

    async def embed(self, text: str) -> Vector:
        loop = asyncio.get_running_loop()
        if loop is not self._loop:  # an embedder may outlive an event loop (tests, the CLI)
            self._loop, self._waiting, self._turn = loop, [], asyncio.Lock()
        vector: asyncio.Future[Vector] = loop.create_future()
        self._waiting.append((text, vector))
        try:
            async with self._turn:
                if not vector.done():  # no batch before took it: this caller runs the next
                    await self._run_next_batch()
            return await vector
        finally:
            vector.cancel()  # a no-op once it holds a vector; else the next batch skips it

    async def _run_next_batch(self) -> None:
        waiting = [(text, vector) for text, vector in self._waiting if not vector.done()]
        batch, self._waiting = waiting[: self._max_batch], waiting[self._max_batch :]
        try:
            vectors = await self._encode([text for text, _ in batch])
        except Exception as error:
            for _, vector in batch:
                if not vector.done():
                    vector.set_exception(error)
            return
        except BaseException:  # this caller was cancelled: the others go again, first
            self._waiting[:0] = [(text, vector) for text, vector in batch if not vector.done()]
            raise
        for (_, vector), value in zip(batch, vectors, strict=True):
            if not vector.done():
                vector.set_result(value)
