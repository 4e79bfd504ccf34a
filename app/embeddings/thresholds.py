"""Default similarity thresholds by model family: one rule for every door (HTTP, MCP, CLI).

Cosine similarities are not comparable across models. On NFCorpus (bench/similarity_bench.py,
docs/MCP.md) all-MiniLM-L6-v2 puts unrelated passages at about 0.0-0.2 and relevant ones at
about 0.3-0.7; OpenAI's text-embedding-3 models score everything somewhat higher. A request's
own `threshold`, or RAG_SEARCH_THRESHOLD_DEFAULT, overrides these.
"""

from __future__ import annotations

from app.settings import Settings

MODEL_THRESHOLDS = {"local:": 0.2, "openai:": 0.25}


def default_threshold(settings: Settings, model_id: str) -> float | None:
    """The threshold a search uses when the caller gives none (None: no threshold)."""
    if settings.search_threshold_default is not None:
        return settings.search_threshold_default
    return next((t for prefix, t in MODEL_THRESHOLDS.items() if model_id.startswith(prefix)), None)
