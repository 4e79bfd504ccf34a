"""What one synchronous ingest request may cost: the chunks it makes, which are what it
embeds (the expensive part: a megabyte of markdown punctuation is some 6,000 chunks, minutes
of a local model). Past `limit`, a 413 that says to send the work as a job, which runs in the
background with no such bound (POST /api/rag/jobs).

A document's chunks are counted twice: before it is chunked, the fewest chunks its tokens can
make (its token count over the chunk size: a tokenizer pass, far cheaper than the splitter),
so a document far too big is refused before any chunking; then its actual chunks. Every
document of a request draws on one allowance, in order; chunks given precomputed are not
counted (nothing embeds them here)."""

from __future__ import annotations

from dataclasses import dataclass

from app.errors import PayloadTooLarge


@dataclass(slots=True)
class ChunkAllowance:
    limit: int
    used: int = 0  # the prepare stage counts, one document after another

    def expect(self, chunks: int) -> None:
        """413 when a document that will make at least `chunks` chunks cannot fit."""
        if self.used + chunks > self.limit:
            raise self._exceeded()

    def take(self, chunks: int) -> None:
        """Count a document's `chunks`; 413 (and nothing counted) when they do not fit."""
        self.expect(chunks)
        self.used += chunks

    def _exceeded(self) -> PayloadTooLarge:
        return PayloadTooLarge(
            f"this request would embed more than {self.limit:,} chunks, what one synchronous "
            "ingest may cost (RAG_SYNC_INGEST_MAX_CHUNKS): send it as a job "
            "(POST /api/rag/jobs), which has no such bound, or split the document",
            extra={"limit": "max_chunks", "value": self.limit},
        )
