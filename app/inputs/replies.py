"""What every door returns alike: the context's quality figures and what differs between
the copies of a duplicate group (HTTP and MCP)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
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


class PassageFigures(Protocol):
    """app.retrieval.differences.Passage, by shape."""

    @property
    def primary(self) -> str: ...
    @property
    def duplicate(self) -> str: ...
    @property
    def primary_changed(self) -> str: ...
    @property
    def duplicate_changed(self) -> str: ...


class DifferenceFigures(Protocol):
    """app.retrieval.differences.Difference, by shape."""

    @property
    def document_id(self) -> uuid.UUID: ...
    @property
    def compared_with(self) -> uuid.UUID: ...
    @property
    def identical(self) -> bool: ...
    @property
    def passages(self) -> Sequence[PassageFigures]: ...
    @property
    def omitted(self) -> int: ...
    @property
    def truncated(self) -> bool: ...


class PassageOut(BaseModel):
    primary: str = Field(description="The passage as the primary has it (with context).")
    duplicate: str = Field(description="The same passage as the duplicate has it.")
    primary_changed: str = Field(description="The primary's words that differ.")
    duplicate_changed: str = Field(description="The duplicate's words that differ.")

    @classmethod
    def of(cls, passage: PassageFigures) -> Self:
        return cls(
            primary=passage.primary,
            duplicate=passage.duplicate,
            primary_changed=passage.primary_changed,
            duplicate_changed=passage.duplicate_changed,
        )


class DifferenceOut(BaseModel):
    document_id: uuid.UUID = Field(description="A duplicate of the group.")
    compared_with: uuid.UUID = Field(description="The group's primary.")
    identical: bool = Field(description="The same words (whitespace aside).")
    passages: list[PassageOut] = Field(description="Where the texts differ, in order (at most 5).")
    passages_omitted: int = Field(description="Further differing passages, not shown.")
    truncated: bool = Field(description="Only the first 100,000 characters were compared.")

    @classmethod
    def of(cls, difference: DifferenceFigures) -> Self:
        return cls(
            document_id=difference.document_id,
            compared_with=difference.compared_with,
            identical=difference.identical,
            passages=[PassageOut.of(p) for p in difference.passages],
            passages_omitted=difference.omitted,
            truncated=difference.truncated,
        )
