"""Ingestion as a pipeline: while one slice of documents is written, the next is embedded and
the one after it parsed and chunked, so a batch goes at the speed of its slowest stage rather
than the sum of all of them.

    feed -> prepare -> look up -> embed -> write -> deliver

Documents are cut into slices of at most `slice_documents` documents and `slice_bytes` bytes
(a slice takes what the feed has ready: a slow source gives smaller slices, never a wait for a
full one). A slice is cut into rounds that hold a document key once (steps.rounds). The
stages are tasks joined by memory streams of `buffer` items, so whatever the number of
documents at most `Limits.documents_in_flight` of them are between the source and their
outcome, and memory stays flat.

Order: a round is looked up only once every earlier round holding one of its keys has been
written, so the same key twice is applied in order even when the two copies are slices apart,
and a later copy never reads what an earlier one is about to replace. Outcomes are delivered
slice by slice, in input order, and counted once. The look-up and the write share a lock: a
pipeline holds one database connection at a time, as a batch did before it (and a
sessionmaker bound to one connection works), and a transaction once begun is finished
before a failure elsewhere (or the caller) cancels the pipeline: a statement cancelled half-way
would cost the connection. `admit`, asked before each slice is embedded,
may stop the pipeline: the slices embedded before it are still written and delivered, the
rest never are.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream as Receive
from anyio.streams.memory import MemoryObjectSendStream as Send

from app.db.tenancy import SessionMaker, readers_of_sessions, tenant_transaction
from app.embeddings import Embedder
from app.errors import AppError
from app.ingest import steps
from app.ingest.allowance import ChunkAllowance
from app.ingest.chunking import Chunker
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import Parser
from app.ingest.steps import Outcome, Round
from app.ingest.store import DocumentKey
from app.ingest.versions import Pending
from app.ingest.writing import write

Deliver = Callable[[int, Outcome], Awaitable[None]]
Admit = Callable[[], Awaitable[bool]]
STAGES = 4  # prepare, look up, embed, write: each holds one slice (or a round of one)


@dataclass(frozen=True, slots=True)
class Limits:
    slice_documents: int = 32
    slice_bytes: int = 8 * 2**20
    buffer: int = 1  # items waiting between two stages
    max_chunks: int | None = None  # chunks all the documents may make (allowance.py)

    @property
    def documents_in_flight(self) -> int:
        """The most documents taken from the source and not yet delivered: a slice read ahead,
        one in each stage and in each buffer between them, and the one the feed holds."""
        return self.slice_documents * (1 + STAGES + (STAGES - 1) * self.buffer) + 1


@dataclass(slots=True)
class _Slice:
    start: int  # index of its first document in the stream
    size: int
    rounds_left: int
    outcomes: dict[int, Outcome] = field(default_factory=dict)


@dataclass(slots=True)
class _Unit:
    """A round of a slice on its way through the stages; a slice whose every document failed
    before any database work travels as one empty unit, to be delivered in its turn."""

    slice: _Slice
    work: Round
    first: bool  # the slice's first round: admission is asked here
    written: anyio.Event = field(default_factory=anyio.Event)

    @property
    def keys(self) -> set[DocumentKey]:
        return {item.key for item in self.work.items}


@dataclass(slots=True)
class _Context:
    sessions: SessionMaker
    embedder: Embedder
    chunker: Chunker
    parser: Parser
    tenant_id: str
    limits: Limits
    database: anyio.Lock = field(default_factory=anyio.Lock)
    holders: dict[DocumentKey, _Unit] = field(default_factory=dict)  # the latest unit per key
    read_ahead: _Budget = field(init=False)
    allowance: ChunkAllowance | None = field(init=False)
    stopped: bool = False

    def __post_init__(self) -> None:
        self.read_ahead = _Budget(self.limits.slice_bytes)
        chunks = self.limits.max_chunks
        self.allowance = None if chunks is None else ChunkAllowance(chunks)


class _Budget:
    """Bytes read from the source ahead of the prepare stage: the feed waits while they would
    exceed a slice's worth (one larger document alone may pass)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0
        self._changed = anyio.Event()

    async def take(self, size: int) -> None:
        while self.used and self.used + size > self.limit:
            await self._changed.wait()
        self.used += size

    def give(self, size: int) -> None:
        self.used -= size
        self._changed.set()
        self._changed = anyio.Event()


async def ingest_stream(
    sessions: SessionMaker,
    embedder: Embedder,
    *,
    chunker: Chunker,
    tenant_id: str,
    documents: Iterable[DocumentInput] | AsyncIterable[DocumentInput],
    deliver: Deliver,
    parser: Parser,
    limits: Limits | None = None,
    admit: Admit | None = None,
) -> bool:
    """Ingest documents as they come; `deliver(index, outcome)` is awaited for each, in input
    order. False when `admit` stopped it before the end. An exception of any stage (or of
    `deliver`) stops the others and is raised as it is."""
    context = _Context(sessions, embedder, chunker, parser, tenant_id, limits or Limits())
    size = context.limits.buffer
    to_prepare = anyio.create_memory_object_stream[DocumentInput](context.limits.slice_documents)
    to_look_up = anyio.create_memory_object_stream[_Unit](size)
    to_embed = anyio.create_memory_object_stream[_Unit](size)
    to_write = anyio.create_memory_object_stream[_Unit](size)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_feed, documents, to_prepare[0], context.read_ahead)
            group.start_soon(_prepare, to_prepare[1], to_look_up[0], context)
            group.start_soon(_look_up, to_look_up[1], to_embed[0], context)
            group.start_soon(_embed, to_embed[1], to_write[0], context, admit)
            await _write(to_write[1], context, deliver)
            group.cancel_scope.cancel()  # after a stop, the stages before embed may still wait
    except BaseExceptionGroup as group:
        raise _first(group) from None
    return not context.stopped


async def _feed(
    documents: Iterable[DocumentInput] | AsyncIterable[DocumentInput],
    send: Send[DocumentInput],
    read_ahead: _Budget,
) -> None:
    async with send, _opened(documents) as source:
        async for document in source:
            await read_ahead.take(len(document.content))
            try:
                await _send(send, document)
            except anyio.BrokenResourceError:
                return


async def _send(send: Send[DocumentInput], document: DocumentInput) -> None:
    """Without a checkpoint while there is room: the documents a source has ready at once
    (a list) reach the prepare stage together and form one slice."""
    try:
        send.send_nowait(document)
    except anyio.WouldBlock:
        await send.send(document)


async def _prepare(receive: Receive[DocumentInput], send: Send[_Unit], ctx: _Context) -> None:
    readers = readers_of_sessions(ctx.sessions)
    start = 0
    async with receive, send:
        while documents := await _next_slice(receive, ctx):
            prepare = functools.partial(
                steps.prepare_slice,
                documents,
                start=start,
                chunker=ctx.chunker,
                embedder=ctx.embedder,
                parser=ctx.parser,
                readers=readers,
                allowance=ctx.allowance,
            )
            pending = await anyio.to_thread.run_sync(prepare)
            items = [p for p in pending if isinstance(p, Pending)]
            split = steps.rounds(items) or [[]]
            slice_ = _Slice(start, len(documents), rounds_left=len(split))
            for index, failure in enumerate(pending, start):
                if isinstance(failure, AppError):
                    slice_.outcomes[index] = failure
            for number, round_ in enumerate(split):
                try:
                    await send.send(_Unit(slice_, Round(round_), first=number == 0))
                except anyio.BrokenResourceError:
                    return
            start += len(documents)


async def _next_slice(receive: Receive[DocumentInput], ctx: _Context) -> list[DocumentInput]:
    """The next document (waiting for it), then those already waiting, up to the limits."""
    try:
        documents = [await receive.receive()]
    except anyio.EndOfStream:
        return []
    size = len(documents[0].content)
    limits = ctx.limits
    while len(documents) < limits.slice_documents and size < limits.slice_bytes:
        try:
            documents.append(receive.receive_nowait())
        except (anyio.WouldBlock, anyio.EndOfStream):
            break
        size += len(documents[-1].content)
    ctx.read_ahead.give(size)
    return documents


async def _look_up(receive: Receive[_Unit], send: Send[_Unit], ctx: _Context) -> None:
    async with receive, send:
        async for unit in receive:
            for key in unit.keys:
                if (earlier := ctx.holders.get(key)) is not None:
                    await earlier.written.wait()
                ctx.holders[key] = unit
            if unit.work.items:
                with anyio.CancelScope(shield=True):
                    async with ctx.database, tenant_transaction(ctx.sessions, ctx.tenant_id) as s:
                        await steps.look_up(s, unit.work, ctx.embedder.model_id)
            try:
                await send.send(unit)
            except anyio.BrokenResourceError:
                return


async def _embed(
    receive: Receive[_Unit],
    send: Send[_Unit],
    ctx: _Context,
    admit: Admit | None,
) -> None:
    async with receive, send:
        async for unit in receive:
            if unit.first and admit is not None and not await admit():
                ctx.stopped = True
                return
            await steps.embed(ctx.embedder, unit.work)
            await send.send(unit)


async def _write(receive: Receive[_Unit], ctx: _Context, deliver: Deliver) -> None:
    async with receive:
        async for unit in receive:
            work = unit.work
            if work.versions:
                with anyio.CancelScope(shield=True):
                    async with ctx.database:
                        written = await write(
                            ctx.sessions, ctx.tenant_id, work.changed, work.versions
                        )
                steps.record_written(work, written)
            unit.written.set()
            for key in unit.keys:
                if ctx.holders.get(key) is unit:
                    del ctx.holders[key]
            await _settle(unit, work, deliver)


async def _settle(unit: _Unit, work: Round, deliver: Deliver) -> None:
    """Record the round's outcomes; once the slice's last round is in, deliver them all."""
    slice_ = unit.slice
    slice_.outcomes.update((item.index, outcome) for item, outcome in work.done)
    slice_.rounds_left -= 1
    if slice_.rounds_left:
        return
    ordered = [slice_.outcomes[i] for i in range(slice_.start, slice_.start + slice_.size)]
    steps.count(ordered)
    for index, outcome in enumerate(ordered, slice_.start):
        await deliver(index, outcome)


@contextlib.asynccontextmanager
async def _opened(
    documents: Iterable[DocumentInput] | AsyncIterable[DocumentInput],
) -> AsyncIterator[AsyncIterator[DocumentInput]]:
    """The documents as an async iterator, closed at the end (an async generator's cleanup
    runs even when the pipeline stops early)."""
    if isinstance(documents, AsyncIterable):
        iterator = aiter(documents)
        try:
            yield iterator
        finally:
            if (close := getattr(iterator, "aclose", None)) is not None:
                await close()
        return

    async def each() -> AsyncIterator[DocumentInput]:
        for document in documents:
            yield document

    yield each()


def _first(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first error of a (possibly nested) group that is not a cancellation: callers see
    what a stage raised."""
    cancelled = anyio.get_cancelled_exc_class()
    errors: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        error = pending.pop(0)
        if isinstance(error, BaseExceptionGroup):
            pending[:0] = error.exceptions
        else:
            errors.append(error)
    return next((e for e in errors if not isinstance(e, cancelled)), errors[0])
