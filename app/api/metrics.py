"""GET /metrics: Prometheus text format."""

from __future__ import annotations

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

router = APIRouter(tags=["health"])


@router.get(
    "/metrics",
    response_class=Response,
    summary="Prometheus metrics",
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}}}},
)
async def metrics() -> Response:
    """Process and service counters (rate-limit fallbacks, cache hits, …)."""
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
