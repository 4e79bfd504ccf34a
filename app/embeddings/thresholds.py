"""Default similarity thresholds by model family: one rule for every door (HTTP, MCP, CLI).

Cosine similarities are not comparable across models. Measured with all-MiniLM-L6-v2 on
NFCorpus and MEDLINE (bench/similarity_bench.py, docs/MCP.md): unrelated documents score about
0.0-0.25 (P90 0.24-0.25), judged-relevant ones 0.35-0.65 on MEDLINE; a query's best result
0.47 (NFCorpus) to 0.71 (MEDLINE) at the median. OpenAI's text-embedding-3 models score higher
(not measured here). A request's own `threshold`, or RAG_SEARCH_THRESHOLD_DEFAULT, overrides.
"""

from __future__ import annotations

from app.settings import Settings

MODEL_THRESHOLDS = {"local:": 0.2, "openai:": 0.25}


def default_threshold(settings: Settings, model_id: str) -> float | None:
    """The threshold a search uses when the caller gives none (None: no threshold)."""
    if settings.search_threshold_default is not None:
        return settings.search_threshold_default
    return next((t for prefix, t in MODEL_THRESHOLDS.items() if model_id.startswith(prefix)), None)
