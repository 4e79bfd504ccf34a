"""Default similarity thresholds by model family: one rule for every door (HTTP, MCP, CLI).

Cosine similarities are not comparable across models. The local default is calibrated on the
shared datasets (bench/similarity_bench.py, docs/BENCHMARKS.md): the similarity under which 95%
of the documents not judged relevant to a query fall, with all-MiniLM-L6-v2: 0.287 on NFCorpus
and 0.303 on MEDLINE, so 0.3. It lets 4-5% of unrelated documents through (0.2 let 16-20%) and
keeps 93% of MEDLINE's relevant documents. OpenAI's text-embedding-3 models score higher (not
measured here). A request's own `threshold`, or RAG_SEARCH_THRESHOLD_DEFAULT, overrides.
"""

from __future__ import annotations

from app.settings import Settings

MODEL_THRESHOLDS = {"local:": 0.3, "openai:": 0.25}


def default_threshold(settings: Settings, model_id: str) -> float | None:
    """The threshold a search uses when the caller gives none (None: no threshold)."""
    if settings.search_threshold_default is not None:
        return settings.search_threshold_default
    return next((t for prefix, t in MODEL_THRESHOLDS.items() if model_id.startswith(prefix)), None)
