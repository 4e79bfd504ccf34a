"""Run every judged query through a search (the service in-process, or over HTTP) for each
mode and fusion setting, and score the document rankings.

A document ranks where its best chunk ranks, so each search asks for `top_k` chunks (default
20) and keeps the first 10 distinct documents; the documents are named by
`external_id`, which is the BEIR document id when the corpus was ingested by `rag eval`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from app.evaluation.metrics import Scores, score_run
from app.inputs.vocabulary import FusionMethod, SearchMode


@dataclass(frozen=True, slots=True)
class EvalSetting:
    mode: SearchMode
    fusion: FusionMethod | None = None
    vector_weight: float | None = None

    @property
    def name(self) -> str:
        if self.mode is not SearchMode.HYBRID:
            return self.mode.value
        if self.fusion is FusionMethod.RRF:
            return "hybrid, rrf"
        weight = "" if self.vector_weight is None else f" {self.vector_weight:g}"
        return f"hybrid, {(self.fusion or FusionMethod.WEIGHTED).value}{weight}"


def default_settings(weights: Sequence[float] = (0.3, 0.5, 0.7)) -> list[EvalSetting]:
    return [
        EvalSetting(SearchMode.KEYWORD),
        EvalSetting(SearchMode.VECTOR),
        EvalSetting(SearchMode.HYBRID, FusionMethod.RRF),
        *(EvalSetting(SearchMode.HYBRID, FusionMethod.WEIGHTED, w) for w in weights),
    ]


# (query text, setting) -> external ids of the hits, best first
Searcher = Callable[[str, EvalSetting], Awaitable[Sequence[str]]]


def first_documents(external_ids: Sequence[str], n: int = 10) -> list[str]:
    return list(dict.fromkeys(external_ids))[:n]


async def evaluate(
    search: Searcher,
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    settings: Sequence[EvalSetting],
) -> dict[str, Scores]:
    results: dict[str, Scores] = {}
    for setting in settings:
        run = {qid: first_documents(await search(text, setting)) for qid, text in queries.items()}
        results[setting.name] = score_run(run, qrels)
    return results
