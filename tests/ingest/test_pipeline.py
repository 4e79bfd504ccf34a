"""The ingestion pipeline over many slices: outcomes in input order, repeated keys applied in
order across slices, failures confined to their documents, and the bounds on what is in
flight. Small slices (two documents) and an embedder that yields make the stages overlap."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import anyio
import pytest
from prometheus_client import REGISTRY
from sqlalchemy import func, select

from app.db.models import Chunk, Document
from app.db.tenancy import SessionMaker, tenant_transaction
from app.embeddings import EmbeddingError
from app.errors import AppError
from app.ingest.documents import INLINE, Limits, ingest_documents, ingest_stream
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from app.ingest.steps import Outcome
from app.ingest.versions import IngestResult
from tests.conftest import registered_tenant, small_chunker
from tests.fakes import WordHashEmbedder

pytestmark = pytest.mark.on_citus

SMALL = Limits(slice_documents=2)


def doc(content: str, external_id: str, **metadata: object) -> DocumentInput:
    return DocumentInput(
        content=content, source_type=SourceType.TEXT, external_id=external_id, metadata=metadata
    )


class SlowEmbedder(WordHashEmbedder):
    """Yields to the event loop while embedding (as a model in a thread or over HTTP does),
    records how many calls run at once, and fails the calls whose texts contain `fail_on`."""

    def __init__(self, fail_on: str | None = None) -> None:
        super().__init__(384)
        self.fail_on = fail_on
        self.running = 0
        self.most_at_once = 0
        self.embedded_texts: list[str] = []

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        self.running += 1
        self.most_at_once = max(self.most_at_once, self.running)
        try:
            await anyio.sleep(0.01)
            if self.fail_on is not None and any(self.fail_on in t for t in texts):
                raise EmbeddingError("the embedding provider went away")
            self.embedded_texts.extend(texts)
            return await super().embed_documents(texts)
        finally:
            self.running -= 1


async def ingest(
    sessions: SessionMaker, tenant_id: str, embedder: WordHashEmbedder, docs: list[DocumentInput]
) -> list[Outcome]:
    return await ingest_documents(
        sessions,
        embedder,
        chunker=small_chunker(),
        tenant_id=tenant_id,
        documents=docs,
        limits=SMALL,
    )


async def stored(sessions: SessionMaker, tenant_id: str) -> dict[str, str]:
    """external_id -> the text of its chunks, as stored."""
    async with tenant_transaction(sessions, tenant_id) as session:
        rows = await session.execute(
            select(Document.external_id, func.string_agg(Chunk.content, " "))
            .join(
                Chunk, (Chunk.tenant_id == Document.tenant_id) & (Chunk.document_id == Document.id)
            )
            .group_by(Document.external_id)
        )
        return {external_id: content for external_id, content in rows}


async def test_outcomes_come_in_input_order_across_slices(sessions: SessionMaker) -> None:
    tenant_id = await registered_tenant(sessions, "order")
    docs = [doc(f"Plover number {n} runs and stops.", f"p{n}") for n in range(9)]
    docs[4] = DocumentInput(content="   ", source_type=SourceType.TEXT, external_id="blank")
    delivered: list[int] = []
    outcomes: list[Outcome] = []

    async def record(index: int, outcome: Outcome) -> None:
        delivered.append(index)
        outcomes.append(outcome)

    await ingest_stream(
        sessions,
        SlowEmbedder(),
        chunker=small_chunker(),
        tenant_id=tenant_id,
        documents=docs,
        deliver=record,
        parser=INLINE,
        limits=SMALL,
    )
    assert delivered == list(range(9))
    assert isinstance(outcomes[4], AppError)
    ids = [o.external_id for o in outcomes if isinstance(o, IngestResult)]
    assert ids == [f"p{n}" for n in range(9) if n != 4]


async def test_the_same_key_in_later_slices_is_applied_in_order(sessions: SessionMaker) -> None:
    tenant_id = await registered_tenant(sessions, "again")
    docs = [
        doc("Knots gather in the thousands.", "knot"),
        doc("Dunlins probe the mud.", "dunlin"),
        doc("Sanderlings chase waves.", "sanderling"),
        doc("Knots gather, then wheel away.", "knot"),  # next slice, while the first is written
        doc("Knots gather, then wheel away.", "knot"),  # same slice as the copy before it
        doc("Turnstones flip seaweed.", "turnstone"),
        doc("Knots settle at dusk.", "knot"),  # a slice later still
    ]
    outcomes = await ingest(sessions, tenant_id, SlowEmbedder(), docs)
    results = [o for o in outcomes if isinstance(o, IngestResult)]
    assert len(results) == len(docs)
    knots = [results[i] for i in (0, 3, 4, 6)]
    assert [(k.created, k.changed) for k in knots] == [
        (True, True),
        (False, True),
        (False, False),  # the copy before it was written first: nothing changed
        (False, True),
    ]
    assert len({k.document_id for k in knots}) == 1
    assert (await stored(sessions, tenant_id))["knot"] == "Knots settle at dusk."


async def test_a_document_the_database_refuses_fails_alone_and_keeps_its_version(
    sessions: SessionMaker,
) -> None:
    tenant_id = await registered_tenant(sessions, "refused")
    await ingest(sessions, tenant_id, WordHashEmbedder(), [doc("Avocets sweep.", "avocet")])
    docs = [doc(f"Stilt {n} stands on pink legs.", f"stilt{n}") for n in range(6)]
    docs[3] = doc("Avocets sweep upturned bills.", "avocet", note="nul \u0000 here")  # jsonb: no
    outcomes = await ingest(sessions, tenant_id, SlowEmbedder(), docs)
    refused = outcomes[3]
    assert isinstance(refused, AppError)
    assert refused.status == 422
    assert all(isinstance(o, IngestResult) for i, o in enumerate(outcomes) if i != 3)
    now = await stored(sessions, tenant_id)
    assert now["avocet"] == "Avocets sweep."
    assert set(now) == {"avocet", *(f"stilt{n}" for n in range(6) if n != 3)}


async def test_an_embedder_failing_mid_stream_leaves_no_partial_version(
    sessions: SessionMaker,
) -> None:
    tenant_id = await registered_tenant(sessions, "embedder")
    await ingest(sessions, tenant_id, WordHashEmbedder(), [doc("Godwits feed on worms.", "godwit")])
    docs = [
        doc("Curlews call at dawn.", "curlew"),
        doc("Whimbrels call too.", "whimbrel"),
        doc("Godwits feed on POISON worms.", "godwit"),  # its slice's embedding fails
        doc("Redshanks bob nervously.", "redshank"),
        doc("Greenshanks wade deeper.", "greenshank"),
    ]
    outcomes = await ingest(sessions, tenant_id, SlowEmbedder(fail_on="POISON"), docs)
    statuses = [o.status if isinstance(o, AppError) else 200 for o in outcomes]
    assert statuses == [200, 200, 503, 503, 200]  # the failed slice: godwit and redshank
    now = await stored(sessions, tenant_id)
    assert now["godwit"] == "Godwits feed on worms."
    assert set(now) == {"curlew", "whimbrel", "godwit", "greenshank"}


async def test_metrics_count_each_document_once(sessions: SessionMaker) -> None:
    tenant_id = await registered_tenant(sessions, "metrics")

    def count(outcome: str) -> float:
        value = REGISTRY.get_sample_value("rag_ingest_documents_total", {"outcome": outcome})
        return value or 0.0

    before = {name: count(name) for name in ("written", "unchanged", "failed")}
    docs = [doc(f"Ruff {n} displays.", f"ruff{n}") for n in range(5)]
    await ingest(sessions, tenant_id, SlowEmbedder(), [*docs, docs[0], doc(" ", "blank")])
    moved = {name: count(name) - before[name] for name in before}
    assert moved == {"written": 5, "unchanged": 1, "failed": 1}


async def test_the_pipeline_holds_a_bounded_number_of_documents(sessions: SessionMaker) -> None:
    tenant_id = await registered_tenant(sessions, "bounds")
    embedder = SlowEmbedder()
    limits = Limits(slice_documents=2, buffer=1)
    pulled = delivered = most_in_flight = 0
    ahead_while_embedding = 0

    async def source() -> AsyncIterator[DocumentInput]:
        nonlocal pulled, most_in_flight, ahead_while_embedding
        for n in range(60):
            pulled += 1
            most_in_flight = max(most_in_flight, pulled - delivered)
            if embedder.running:
                ahead_while_embedding += 1
            yield doc(f"Oystercatcher {n} hammers mussels.", f"o{n}")

    async def record(_index: int, outcome: Outcome) -> None:
        nonlocal delivered
        assert isinstance(outcome, IngestResult)
        delivered += 1

    completed = await ingest_stream(
        sessions,
        embedder,
        chunker=small_chunker(),
        tenant_id=tenant_id,
        documents=source(),
        deliver=record,
        parser=INLINE,
        limits=limits,
    )
    assert completed
    assert delivered == 60
    assert embedder.most_at_once == 1  # one embedding call at a time
    assert most_in_flight <= limits.documents_in_flight < 60
    assert ahead_while_embedding > 0  # documents are read and prepared during embedding


async def test_admission_refused_stops_after_the_slices_already_embedded(
    sessions: SessionMaker,
) -> None:
    tenant_id = await registered_tenant(sessions, "admit")
    asked = 0

    async def admit() -> bool:
        nonlocal asked
        asked += 1
        return asked <= 2

    outcomes: list[Outcome] = []

    async def record(_index: int, outcome: Outcome) -> None:
        outcomes.append(outcome)

    completed = await ingest_stream(
        sessions,
        SlowEmbedder(),
        chunker=small_chunker(),
        tenant_id=tenant_id,
        documents=[doc(f"Lapwing {n} tumbles.", f"l{n}") for n in range(10)],
        deliver=record,
        parser=INLINE,
        limits=SMALL,
        admit=admit,
    )
    assert not completed
    assert len(outcomes) == 4  # two slices of two
    assert set(await stored(sessions, tenant_id)) == {"l0", "l1", "l2", "l3"}


class BrokenEmbedder(WordHashEmbedder):
    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        raise RuntimeError("a bug, not an unavailable provider")


async def test_an_unexpected_error_in_a_stage_is_raised_as_it_is(sessions: SessionMaker) -> None:
    tenant_id = await registered_tenant(sessions, "bug")
    docs = [doc(f"Snipe {n} drums.", f"s{n}") for n in range(5)]
    with pytest.raises(RuntimeError, match="a bug"):
        await ingest(sessions, tenant_id, BrokenEmbedder(), docs)
    assert await stored(sessions, tenant_id) == {}
