"""What every door returns alike: the context's quality figures (HTTP and MCP)."""

from __future__ import annotations

from typing import Protocol, Self

from pydantic import BaseModel, Field


class ContextFigures(Protocol):
    """app.citations.metrics.ContextMetrics, by shape (the domain imports from here)."""

    @property
    def avg_similarity(self) -> float: ...
    @property
    def source_diversity(self) -> float: ...
    @property
    def total_chars(self) -> int: ...
    @property
    def total_tokens(self) -> int: ...
    @property
    def quality_score(self) -> float: ...
    @property
    def chunks_used(self) -> int: ...
    @property
    def unique_documents(self) -> int: ...


class MetricsOut(BaseModel):
    avg_similarity: float
    source_diversity: float = Field(description="Distinct documents / chunks used.")
    total_chars: int
    total_tokens: int
    quality_score: float = Field(description="0.7 x avg_similarity + 0.3 x source_diversity.")
    chunks_used: int
    unique_documents: int

    @classmethod
    def of(cls, metrics: ContextFigures) -> Self:
        return cls(
            avg_similarity=round(metrics.avg_similarity, 6),
            source_diversity=round(metrics.source_diversity, 6),
            total_chars=metrics.total_chars,
            total_tokens=metrics.total_tokens,
            quality_score=round(metrics.quality_score, 6),
            chunks_used=metrics.chunks_used,
            unique_documents=metrics.unique_documents,
        )
