"""Ranking metrics at cut-off 10, as BEIR (pytrec_eval) computes them: graded relevance with
linear gain for nDCG; recall of the relevant documents; reciprocal rank of the first one."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


def ndcg_at_10(ranked: Sequence[str], relevant: Mapping[str, int]) -> float:
    dcg = sum(relevant.get(d, 0) / math.log2(i + 2) for i, d in enumerate(ranked[:10]))
    ideal = sorted(relevant.values(), reverse=True)[:10]
    idcg = sum(r / math.log2(i + 2) for i, r in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall_at_10(ranked: Sequence[str], relevant: Mapping[str, int]) -> float:
    wanted = {d for d, grade in relevant.items() if grade > 0}
    return len(wanted & set(ranked[:10])) / len(wanted) if wanted else 0.0


def mrr_at_10(ranked: Sequence[str], relevant: Mapping[str, int]) -> float:
    for i, d in enumerate(ranked[:10]):
        if relevant.get(d, 0) > 0:
            return 1.0 / (i + 1)
    return 0.0


@dataclass(frozen=True, slots=True)
class Scores:
    ndcg_at_10: float
    recall_at_10: float
    mrr_at_10: float
    queries: int


def score_run(run: Mapping[str, Sequence[str]], qrels: Mapping[str, Mapping[str, int]]) -> Scores:
    """Means over every judged query (a query with no results scores 0)."""
    n = len(qrels)
    if not n:
        return Scores(0.0, 0.0, 0.0, 0)
    totals = [0.0, 0.0, 0.0]
    for query_id, relevant in qrels.items():
        ranked = run.get(query_id, [])
        totals[0] += ndcg_at_10(ranked, relevant)
        totals[1] += recall_at_10(ranked, relevant)
        totals[2] += mrr_at_10(ranked, relevant)
    ndcg, recall, mrr = (round(t / n, 4) for t in totals)
    return Scores(ndcg, recall, mrr, n)
