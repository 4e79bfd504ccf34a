"""Retrieval quality on a tenant's own judged queries: BEIR folders, metrics, runs per setting."""

from app.evaluation.beir import BeirSet, read_beir
from app.evaluation.metrics import Scores, mrr_at_10, ndcg_at_10, recall_at_10, score_run
from app.evaluation.runner import EvalSetting, default_settings, evaluate

__all__ = [
    "BeirSet",
    "EvalSetting",
    "Scores",
    "default_settings",
    "evaluate",
    "mrr_at_10",
    "ndcg_at_10",
    "read_beir",
    "recall_at_10",
    "score_run",
]
