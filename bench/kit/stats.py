"""Latency statistics. Retrieval metrics (nDCG@10, recall@10, MRR@10) are app.evaluation's."""

from __future__ import annotations

import statistics
from collections.abc import Sequence


def quantile(samples: Sequence[float], q: float) -> float:
    """Inclusive quantile, q in [0, 1] (P50 = 0.5, P95 = 0.95); NaN without samples."""
    if not samples:
        return float("nan")
    if len(samples) == 1:
        return float(samples[0])
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[round(q * 100) - 1]


def latency_summary(samples_ms: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(samples_ms),
        "p50_ms": round(quantile(samples_ms, 0.50), 3),
        "p95_ms": round(quantile(samples_ms, 0.95), 3),
        "p99_ms": round(quantile(samples_ms, 0.99), 3),
        "max_ms": round(max(samples_ms), 3),
    }
