"""Queries that arrive while one is embedded go together into the next inference
(app/embeddings/batching.py): each caller gets its own text's vector, a caller that leaves
is left out or hands its batch on, an error reaches exactly the batch it hit."""

from __future__ import annotations

import asyncio

import pytest

from app.embeddings.batching import QueryBatcher
from app.embeddings.local import LocalEmbedder


class Model:
    """Encodes a text as [its length]; while `hold` is set, each call waits until its gate
    (`gates[i]` for the i-th call) is opened."""

    def __init__(self, *, fail_on: str | None = None) -> None:
        self.batches: list[list[str]] = []
        self.gates: list[asyncio.Event] = []
        self.hold = False
        self.fail_on = fail_on

    async def encode(self, texts: list[str]) -> list[list[float]]:
        self.batches.append(texts)
        self.gates.append(gate := asyncio.Event())
        if self.hold:
            await gate.wait()
        if self.fail_on in texts:
            raise RuntimeError(f"cannot embed {self.fail_on}")
        return [[float(len(text))] for text in texts]

    async def running(self, call: int) -> None:
        """Until the `call`-th inference (from 0) has begun."""
        while len(self.batches) <= call:  # noqa: ASYNC110 (a turn of the loop, no timer)
            await asyncio.sleep(0)

    def open_all(self) -> None:
        self.hold = False
        for gate in self.gates:
            gate.set()


async def started(model: Model, batcher: QueryBatcher, text: str) -> asyncio.Task[list[float]]:
    """`text` embedding, its inference begun and held."""
    model.hold = True
    task = asyncio.create_task(batcher.embed(text))
    await model.running(len(model.batches))
    return task


async def test_a_query_alone_is_embedded_at_once_alone() -> None:
    model = Model()
    batcher = QueryBatcher(model.encode, max_batch=8)
    assert await batcher.embed("abc") == [3.0]
    assert await batcher.embed("abcd") == [4.0]
    assert model.batches == [["abc"], ["abcd"]]


async def test_queries_waiting_for_an_inference_share_the_next_up_to_the_bound() -> None:
    model = Model()
    batcher = QueryBatcher(model.encode, max_batch=4)
    first = await started(model, batcher, "x")
    texts = ["y" * n for n in range(1, 7)]
    waiting = [asyncio.create_task(batcher.embed(text)) for text in texts]
    await asyncio.sleep(0)
    model.open_all()
    assert await first == [1.0]
    assert await asyncio.gather(*waiting) == [[float(len(text))] for text in texts]
    assert model.batches == [["x"], texts[:4], texts[4:]]


async def test_a_caller_that_left_is_not_embedded() -> None:
    model = Model()
    batcher = QueryBatcher(model.encode, max_batch=8)
    first = await started(model, batcher, "x")
    gone = asyncio.create_task(batcher.embed("gone"))
    staying = asyncio.create_task(batcher.embed("stay"))
    await asyncio.sleep(0)
    gone.cancel()
    model.open_all()
    assert await first == [1.0]
    assert await staying == [4.0]
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert model.batches == [["x"], ["stay"]]


async def test_when_the_caller_running_a_batch_leaves_the_others_still_get_theirs() -> None:
    model = Model()
    batcher = QueryBatcher(model.encode, max_batch=8)
    first = await started(model, batcher, "x")
    leader = asyncio.create_task(batcher.embed("leader"))
    other = asyncio.create_task(batcher.embed("other"))
    await asyncio.sleep(0)
    model.gates[0].set()
    await first
    await model.running(1)  # the leader's batch (leader, other), held
    leader.cancel()
    await asyncio.sleep(0)
    model.open_all()
    assert await other == [5.0]
    with pytest.raises(asyncio.CancelledError):
        await leader
    assert model.batches == [["x"], ["leader", "other"], ["other"]]


async def test_an_error_reaches_the_batch_it_hit_and_the_next_batch_runs() -> None:
    model = Model(fail_on="bad")
    batcher = QueryBatcher(model.encode, max_batch=2)
    first = await started(model, batcher, "x")
    same_batch = [asyncio.create_task(batcher.embed(text)) for text in ("bad", "ok")]
    later = asyncio.create_task(batcher.embed("later"))
    await asyncio.sleep(0)
    model.open_all()
    await first
    for task in same_batch:
        with pytest.raises(RuntimeError, match="cannot embed bad"):
            await task
    assert await later == [5.0]
    assert model.batches == [["x"], ["bad", "ok"], ["later"]]


async def test_the_model_gives_a_query_the_same_vector_alone_and_in_a_batch(
    minilm: LocalEmbedder,
) -> None:
    texts = [
        "how do volcanoes erupt",
        "what temperature should bread bake at for a crisp crust",
        "rotating lamps of lighthouses",
    ]
    alone = [await minilm.embed_query(text) for text in texts]
    together = await asyncio.gather(*(minilm.embed_query(text) for text in texts * 3))
    for text, vector in zip(texts * 3, together, strict=True):
        expected = alone[texts.index(text)]
        assert sum(a * b for a, b in zip(vector, expected, strict=True)) > 0.99999
