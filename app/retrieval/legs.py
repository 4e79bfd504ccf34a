"""The legs of a keyword or hybrid search in an ORM session, and their fusion.

A keyword search is its BM25 leg; a hybrid search fuses it with a vector leg, weighted (each
leg's candidates scored by the other leg too) or by reciprocal rank (fusion.py). `SessionLegs`
fetches them in an ORM session's tenant transaction: statements built per request by
SQLAlchemy, for any filters, web-search operators and the caller's access condition. The
commonest request (no filters, no operators) goes the direct way instead: its legs, their
fusion and its hits in one statement (direct_legs.py), which tests/retrieval/test_direct_paths.py
holds to this one's answer. Row-level security does the same filtering on both.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import ColumnElement
from sqlalchemy.ext.asyncio import AsyncSession

from app.retrieval.bm25 import Bm25Ranking, bm25_ranked, bm25_scores
from app.retrieval.filters import conditions
from app.retrieval.fusion import BothScores, FusionMethod, fuse, weighted_fuse
from app.retrieval.nearest import cosines, nearest_scored
from app.retrieval.requests import SearchMode, SearchRequest

Ranking = list[tuple[uuid.UUID, float]]


async def ranked(legs: SessionLegs, request: SearchRequest) -> Ranking:
    """Keyword and hybrid: (chunk id, score) of every candidate that passed, best first."""
    lexical = await legs.lexical()
    if request.mode is SearchMode.KEYWORD:
        return lexical.ranked
    nearest = await legs.nearest()
    if request.fusion is FusionMethod.RRF:
        return fuse([nearest, lexical.ranked], k=request.rrf_k)
    # every candidate of either leg with both its scores: the vector leg's chunks missing from
    # the keyword leg scored by BM25, the keyword leg's missing from the vector leg given their
    # cosine (two statements of at most 40 rows by key)
    cosine = dict(nearest)
    bm25 = dict(lexical.ranked)
    more_bm25, more_cosine = await legs.cross(
        lexical, [c for c in cosine if c not in bm25], [c for c in bm25 if c not in cosine]
    )
    bm25 |= more_bm25
    cosine |= more_cosine
    both = {c: BothScores(cosine.get(c, 0.0), bm25.get(c, 0.0)) for c in {*cosine, *bm25}}
    return weighted_fuse(both, ceiling=lexical.ceiling, vector_weight=request.vector_weight)


@dataclass(frozen=True, slots=True)
class SessionLegs:
    session: AsyncSession
    vector: list[float]
    where: Sequence[ColumnElement[bool]]
    request: SearchRequest
    exact: bool
    tenant_id: str

    async def lexical(self) -> Bm25Ranking:
        return await bm25_ranked(
            self.session,
            tenant_id=self.tenant_id,
            query=self.request.query,
            where=self.where,
            fetch=self.request.fetch,
            params=self.request.bm25,
            narrowed=bool(conditions(self.request.filters)),
        )

    async def nearest(self) -> Ranking:
        return await nearest_scored(self.session, self.vector, self.where, self.request, self.exact)

    async def cross(
        self,
        ranking: Bm25Ranking,
        bm25_of: Sequence[uuid.UUID],
        cosine_of: Sequence[uuid.UUID],
    ) -> tuple[dict[uuid.UUID, float], dict[uuid.UUID, float]]:
        """The BM25 scores of `bm25_of` (0 for a chunk holding no query term) and the cosine
        similarities of `cosine_of` (those still there)."""
        bm25 = await bm25_scores(self.session, ranking, bm25_of)
        cosine = await cosines(self.session, self.vector, cosine_of) if cosine_of else {}
        return bm25, cosine
