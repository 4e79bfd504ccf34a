"""The service's embedder as a job sees it: progress inside a large document."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import text

from app.db.tenancy import SessionMaker, tenant_transaction
from app.embeddings import Embedder, WrappedEmbedder

PROGRESS_BATCH = 64  # chunks embedded between two progress writes


class ProgressEmbedder(WrappedEmbedder):
    """The service's embedder, embedding a document's chunks in slices and writing how many
    are done to the job after each slice (progress inside one large document)."""

    def __init__(
        self, inner: Embedder, sessions: SessionMaker, tenant_id: str, job_id: uuid.UUID
    ) -> None:
        super().__init__(inner)
        self._sessions, self._tenant_id, self._job_id = sessions, tenant_id, job_id

    async def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        vectors: list[list[float]] = []
        for start in range(0, len(texts), PROGRESS_BATCH):
            vectors.extend(await self.inner.embed_documents(texts[start : start + PROGRESS_BATCH]))
            await self._report(len(vectors), len(texts))
        return vectors

    async def _report(self, done: int, total: int) -> None:
        async with tenant_transaction(self._sessions, self._tenant_id) as session:
            await session.execute(
                text(
                    "update ingest_jobs set chunks_in_progress = :done,"
                    " chunks_in_progress_total = :total, updated_at = now()"
                    " where tenant_id = :tenant and id = :id"
                ),
                {"done": done, "total": total, "tenant": self._tenant_id, "id": self._job_id},
            )

    async def aclose(self) -> None:
        return None  # the service's embedder: closed by the lifespan
