"""BM25 keyword ranking with per-tenant statistics kept by triggers (migration 0003)."""

from __future__ import annotations

import math
import uuid

import pytest
from sqlalchemy import delete, select, update

from app.db import bm25 as bm25_stats
from app.db.models import Bm25Corpus, Bm25Posting, Bm25Term, Document
from app.db.tenancy import SessionMaker, tenant_transaction
from app.ingest.catalog import delete_document
from app.ingest.documents import ingest_documents
from app.ingest.inputs import DocumentInput
from app.ingest.parsing import SourceType
from app.ingest.reindex import reembed
from app.ingest.versions import IngestResult
from app.retrieval import (
    Bm25Params,
    FusionMethod,
    SearchMode,
    SearchRequest,
    fuse,
    search,
    weighted_fuse,
)
from app.retrieval.bm25 import bounded_query
from app.retrieval.filters import SearchFilters
from app.retrieval.fusion import BothScores
from tests.conftest import registered_tenant, small_chunker
from tests.fakes import WordHashEmbedder

pytestmark = pytest.mark.on_citus

K1, B = 1.2, 0.4


async def ingest(
    sessions: SessionMaker,
    embedder: WordHashEmbedder,
    tenant_id: str,
    texts: dict[str, str],
    *,
    collection: str = "default",
) -> dict[str, uuid.UUID]:
    documents = [
        DocumentInput(
            content=content,
            source_type=SourceType.TEXT,
            title=external_id,
            external_id=external_id,
            collection=collection,
        )
        for external_id, content in texts.items()
    ]
    results = await ingest_documents(
        sessions, embedder, chunker=small_chunker(), tenant_id=tenant_id, documents=documents
    )
    ids: dict[str, uuid.UUID] = {}
    for external_id, result in zip(texts, results, strict=True):
        assert isinstance(result, IngestResult)
        ids[external_id] = result.document_id
    return ids


async def keyword(
    sessions: SessionMaker, embedder: WordHashEmbedder, tenant_id: str, query: str, **kw: object
) -> dict[str, float]:
    request = SearchRequest(query=query, mode=SearchMode.KEYWORD, top_k=20, **kw)  # type: ignore[arg-type]
    outcome = await search(sessions, embedder, tenant_id=tenant_id, request=request)
    return {hit.external_id: hit.score for hit in outcome.hits}


def bm25(tfs: dict[str, int], length: int, df: dict[str, int], n: int, avgdl: float) -> float:
    total = 0.0
    for term, tf in tfs.items():
        idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
        total += idf * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avgdl))
    return total


async def test_scores_match_the_formula_by_hand(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    tenant_id = await registered_tenant(sessions)
    # english analyser: stop words go, "cats" -> cat, "sleeping" -> sleep, "dogs" -> dog; each
    # chunk's length counts its document's title too (d1...d4, one token).
    await ingest(
        sessions,
        embedder,
        tenant_id,
        {
            "d1": "cats sleeping cats",  # cat x2, sleep: length 3 + 1
            "d2": "dogs bark",  # dog, bark: length 2 + 1
            "d3": "cats and dogs and birds",  # cat, dog, bird: length 3 + 1
            "d4": "birds sing at dawn",  # bird, sing, dawn: length 3 + 1
        },
    )
    n, avgdl = 4, (4 + 3 + 4 + 4) / 4
    df = {"cat": 2, "dog": 2, "sleep": 1}
    scores = await keyword(sessions, embedder, tenant_id, "sleeping cats with dogs")
    assert set(scores) == {"d1", "d2", "d3"}
    expected = {
        "d1": bm25({"cat": 2, "sleep": 1}, 4, df, n, avgdl),
        "d2": bm25({"dog": 1}, 3, df, n, avgdl),
        "d3": bm25({"cat": 1, "dog": 1}, 4, df, n, avgdl),
    }
    for name, value in expected.items():
        assert scores[name] == pytest.approx(value, abs=1e-6)
    # k1 and b come from the request
    other = await keyword(
        sessions, embedder, tenant_id, "dogs", bm25=Bm25Params(k1=1.5, b=1.0, max_terms=32)
    )
    idf = math.log(1 + (n - 2 + 0.5) / 2.5)
    assert other["d2"] == pytest.approx(idf * 2.5 / (1 + 1.5 * (3 / avgdl)), abs=1e-6)


async def test_rare_terms_outrank_common_ones(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    tenant_id = await registered_tenant(sessions)
    common = {f"filler{i}": f"the report mentions revenue in quarter {i}" for i in range(12)}
    await ingest(
        sessions,
        embedder,
        tenant_id,
        {
            **common,
            "rare": "a single line about zeolite catalysts",
            "often": "revenue revenue revenue grew",
        },
    )
    scores = await keyword(sessions, embedder, tenant_id, "revenue zeolite")
    ranked = sorted(scores, key=lambda name: -scores[name])
    assert ranked[0] == "rare"  # one rare term beats three of a word in 13 of 14 chunks


async def test_operators_are_kept_and_long_queries_bounded(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    tenant_id = await registered_tenant(sessions)
    await ingest(
        sessions,
        embedder,
        tenant_id,
        {"a": "solar panels on the roof", "b": "solar power plants", "c": "roof tiles"},
    )
    assert set(await keyword(sessions, embedder, tenant_id, "solar roof")) == {"a", "b", "c"}
    assert set(await keyword(sessions, embedder, tenant_id, "solar -roof")) == {"b"}
    assert set(await keyword(sessions, embedder, tenant_id, '"solar panels"')) == {"a"}
    assert set(await keyword(sessions, embedder, tenant_id, "tiles OR plants")) == {"b", "c"}
    # prose: "or" is a word, not an operator (as one it would AND the other words)
    assert set(await keyword(sessions, embedder, tenant_id, "panels or power tiles")) == {
        "a",
        "b",
        "c",
    }
    assert bounded_query("one two three four", 2) == "one two"
    assert bounded_query('"one two three" four', 2) == '"one two"'
    long_query = " ".join(["filler"] * 500) + " solar"
    assert await keyword(sessions, embedder, tenant_id, long_query) == {}  # solar cut off


async def assert_exact(sessions: SessionMaker, tenant_id: str) -> bm25_stats.Bm25Stats:
    async with tenant_transaction(sessions, tenant_id) as session:
        counted, kept = await bm25_stats.recount(session), await bm25_stats.stored(session)
    assert kept == counted
    assert (await bm25_stats.verify(sessions, tenant_id)).ok
    return kept


async def test_statistics_stay_exact_through_every_write(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    tenant_id = await registered_tenant(sessions)
    long_text = " ".join(f"paragraph {i} about topic{i % 9} and shared words." for i in range(300))
    ids = await ingest(
        sessions,
        embedder,
        tenant_id,
        {"long": long_text, "short": "cobalt mining", "other": "nickel mining"},
    )
    first = await assert_exact(sessions, tenant_id)
    assert first.chunks > 3
    assert first.terms["mine"] == 2
    # re-ingest of a changed document (its chunks are replaced), and an unchanged one
    await ingest(
        sessions, embedder, tenant_id, {"short": "cobalt refining", "other": "nickel mining"}
    )
    after = await assert_exact(sessions, tenant_id)
    assert after.terms["mine"] == 1
    assert after.terms["refin"] == 1
    # a second collection, then delete
    await ingest(sessions, embedder, tenant_id, {"short": "cobalt mining"}, collection="more")
    await assert_exact(sessions, tenant_id)
    async with tenant_transaction(sessions, tenant_id) as session:
        await delete_document(session, ids["long"])
    gone = await assert_exact(sessions, tenant_id)
    assert "topic3" not in gone.terms
    # reindex to another model: vectors change, text does not
    other_model = WordHashEmbedder(model_id="test:other-model")
    await reembed(
        sessions, other_model, batch_size=2, progress=lambda _n: None, tenants=[tenant_id]
    )
    assert await assert_exact(sessions, tenant_id) == gone
    # the last documents deleted: nothing counts any more
    async with tenant_transaction(sessions, tenant_id) as session:
        for document_id in list(await session.scalars(select(Document.id))):
            await delete_document(session, document_id)
    assert await assert_exact(sessions, tenant_id) == bm25_stats.Bm25Stats(0, 0, {})


async def test_rebuild_repairs_broken_statistics(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    tenant_id = await registered_tenant(sessions)
    await ingest(sessions, embedder, tenant_id, {"a": "glacier ice melts", "b": "ice cream"})
    async with tenant_transaction(sessions, tenant_id) as session:
        await session.execute(update(Bm25Term).where(Bm25Term.lexeme == "ice").values(df=7))
        await session.execute(delete(Bm25Term).where(Bm25Term.lexeme == "glacier"))
        await session.execute(update(Bm25Posting).where(Bm25Posting.lexeme == "ice").values(tf=3))
        await session.execute(delete(Bm25Posting).where(Bm25Posting.lexeme == "cream"))
    broken = await bm25_stats.verify(sessions, tenant_id)
    assert not broken.ok
    assert broken.wrong_terms == 2
    assert broken.wrong_postings == 2 + 2 + 1  # both ice rows, each way; cream missing
    repaired = await bm25_stats.rebuild(sessions, tenant_id)
    assert repaired.ok
    assert repaired.chunks == 2
    await assert_exact(sessions, tenant_id)


async def test_another_tenants_corpus_never_changes_a_score(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    tenant_a, tenant_b = await registered_tenant(sessions), await registered_tenant(sessions)
    await ingest(
        sessions,
        embedder,
        tenant_a,
        {"x": "volcanic ash clouds", "y": "ash trees in autumn", "z": "clouds over the sea"},
    )
    before = await keyword(sessions, embedder, tenant_a, "volcanic ash clouds")
    # B's corpus uses A's words a lot (their df and the average length would move A's scores)
    await ingest(
        sessions,
        embedder,
        tenant_b,
        {f"b{i}": "ash " * (i + 1) + "volcanic clouds everywhere " * 30 for i in range(40)},
    )
    after = await keyword(sessions, embedder, tenant_a, "volcanic ash clouds")
    assert after == before
    async with tenant_transaction(sessions, tenant_a) as session:
        visible = set((await session.scalars(select(Bm25Term.tenant_id))).all())
    assert visible == {tenant_a}  # RLS: B's statistics are not even readable


async def test_hybrid_finds_the_keyword_only_and_the_paraphrase_only_match(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    """The fake embedder is bag of words, so a 'paraphrase' is a text sharing words the
    analyser drops (stop words) or stems elsewhere; the keyword-only match shares a stem that
    the embedder sees as a different word."""
    tenant_id = await registered_tenant(sessions)
    filler = {f"f{i}": f"unrelated note {i} on gardening soil and compost heaps" for i in range(10)}
    await ingest(
        sessions,
        embedder,
        tenant_id,
        {
            **filler,
            # keyword-only: "connections" stems to "connect"; the embedder sees another word
            "lexical": "network connections",
            # vector-only: the same words as the query but stop words to the analyser
            "semantic": "what is it they were there for",
        },
    )
    query = "what is it they were there for connecting"
    for fusion in FusionMethod:
        request = SearchRequest(query=query, mode=SearchMode.HYBRID, top_k=2, fusion=fusion)
        outcome = await search(sessions, embedder, tenant_id=tenant_id, request=request)
        assert {hit.external_id for hit in outcome.hits} == {"lexical", "semantic"}, fusion
    vector_only = await search(
        sessions,
        embedder,
        tenant_id=tenant_id,
        request=SearchRequest(query=query, mode=SearchMode.VECTOR, top_k=2),
    )
    assert "lexical" not in {hit.external_id for hit in vector_only.hits}
    keyword_only = await keyword(sessions, embedder, tenant_id, query)
    assert set(keyword_only) == {"lexical"}


def test_weighted_fusion_puts_both_scores_on_absolute_scales() -> None:
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    both = {
        a: BothScores(cosine=0.62, bm25=2.0),
        b: BothScores(cosine=0.60, bm25=0.0),
        c: BothScores(cosine=-0.1, bm25=14.0),  # a negative cosine counts as 0
    }
    fused = dict(weighted_fuse(both, ceiling=20.0, vector_weight=0.6))
    assert fused[a] == pytest.approx(0.6 * 0.62 + 0.4 * 0.1)
    assert fused[b] == pytest.approx(0.6 * 0.60)
    assert fused[c] == pytest.approx(0.4 * 0.7)
    assert [chunk for chunk, _ in weighted_fuse(both, ceiling=20.0, vector_weight=1.0)] == [
        a,
        b,
        c,
    ]
    # No query term in the tenant: the ceiling is 0 and the vector side decides alone.
    assert dict(weighted_fuse(both, ceiling=0.0, vector_weight=0.6))[c] == 0.0
    rrf = dict(fuse([[(a, 0.62), (b, 0.6)], [(c, 14.0), (a, 2.0)]], k=60))
    assert rrf[a] == pytest.approx(1 / 61 + 1 / 62)


async def test_hybrid_scores_every_candidate_on_both_sides(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    """A chunk found by one leg only still gets its real score on the other: the fused
    score is exactly w * cosine + (1 - w) * BM25 / ceiling, whichever leg found it."""
    tenant_id = await registered_tenant(sessions)
    texts = {f"filler{i}": f"unrelated filler text number {i}" for i in range(50)}
    texts |= {"target": "zircon crystals grow slowly", "other": "zircon in sand"}
    await ingest(sessions, embedder, tenant_id, texts)
    query = "zircon crystals"
    outcomes = {}
    for mode in SearchMode:
        request = SearchRequest(query=query, mode=mode, top_k=60, candidates=60)
        outcomes[mode] = await search(sessions, embedder, tenant_id=tenant_id, request=request)
    bm25 = {hit.chunk_id: hit.score for hit in outcomes[SearchMode.KEYWORD].hits}
    cosine = {hit.chunk_id: hit.similarity for hit in outcomes[SearchMode.VECTOR].hits}
    async with tenant_transaction(sessions, tenant_id) as session:
        n = await session.scalar(select(Bm25Corpus.chunks))
        dfs = (
            await session.execute(
                select(Bm25Term.lexeme, Bm25Term.df).where(
                    Bm25Term.lexeme.in_(["zircon", "crystal"])
                )
            )
        ).all()
    assert n == len(texts)
    assert len(dfs) == 2
    idfs = [math.log(1 + (n - df + 0.5) / (df + 0.5)) for _lexeme, df in dfs]
    ceiling = sum(idfs) * (K1 + 1)
    for hit in outcomes[SearchMode.HYBRID].hits:
        expected = 0.6 * cosine[hit.chunk_id] + 0.4 * bm25.get(hit.chunk_id, 0.0) / ceiling
        assert hit.score == pytest.approx(expected, abs=2e-6), hit.external_id
    assert outcomes[SearchMode.HYBRID].hits[0].external_id == "target"


async def test_filtered_and_short_rankings_are_the_exact_top_of_the_full_one(
    sessions: SessionMaker, embedder: WordHashEmbedder
) -> None:
    """Unfiltered, the chunks are checked in score order until enough pass; with filters, the
    passing chunks come first. Either way the result is the full ranking's exact top."""
    tenant_id = await registered_tenant(sessions)
    # every chunk of its own length: no ties, so the order is the scores' alone
    loud = {f"a{i}": f"zircon crystal {'zircon ' * (i % 5)}{'mine ' * i}" for i in range(40)}
    quiet = {f"b{i}": f"crystal of quartz {'crystal ' * (i % 3)}{'rock ' * i}" for i in range(12)}
    await ingest(sessions, embedder, tenant_id, loud, collection="loud")
    quiet_ids = await ingest(sessions, embedder, tenant_id, quiet, collection="quiet")

    async def ranked(top_k: int, **filters: object) -> list[tuple[str, float]]:
        request = SearchRequest(
            query="zircon crystal",
            mode=SearchMode.KEYWORD,
            top_k=top_k,
            candidates=top_k,
            filters=SearchFilters(**filters),  # type: ignore[arg-type]
        )
        outcome = await search(sessions, embedder, tenant_id=tenant_id, request=request)
        return [(hit.external_id, hit.score) for hit in outcome.hits]

    everything = await ranked(100)
    assert len(everything) == 52
    scores = [score for _, score in everything]
    assert scores == sorted(set(scores), reverse=True)
    assert await ranked(3) == everything[:3]
    only_quiet = [item for item in everything if item[0].startswith("b")]
    assert await ranked(5, collections=["quiet"]) == only_quiet[:5]
    some = [quiet_ids["b1"], quiet_ids["b7"]]
    assert await ranked(5, document_ids=some) == [i for i in only_quiet if i[0] in ("b1", "b7")]
