"""GET /metrics: Prometheus text format (every worker's, under `rag serve --workers N`)."""

from __future__ import annotations

from fastapi import APIRouter, Response

from app.observability.exposition import CONTENT_TYPE, render

router = APIRouter(tags=["health"])


@router.get(
    "/metrics",
    response_class=Response,
    summary="Prometheus metrics",
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics() -> Response:
    """Requests by route and status, latencies, search stages, embedding calls and cache,
    rate-limit decisions, database pool, ingestion and dedupe (docs/OBSERVABILITY.md)."""
    return Response(render(), media_type=CONTENT_TYPE)
