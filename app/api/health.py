"""Liveness and readiness."""

from __future__ import annotations

import asyncio
import time

from fastapi import APIRouter, Response
from pydantic import BaseModel
from sqlalchemy import text

from app.api.deps import ResourcesDep

router = APIRouter(tags=["health"])
READY_TIMEOUT_SECONDS = 2.0


class Health(BaseModel):
    status: str


class Check(BaseModel):
    ok: bool
    latency_ms: float
    error: str | None = None


class Readiness(BaseModel):
    status: str
    checks: dict[str, Check]


@router.get("/healthz")
async def healthz() -> Health:
    """The process is up and serving."""
    return Health(status="ok")


@router.get("/readyz", responses={503: {"model": Readiness}})
async def readyz(resources: ResourcesDep, response: Response) -> Readiness:
    """The database answers (and, once configured, Redis and the embedder)."""
    checks = {"database": await _check_database(resources)}
    ready = all(check.ok for check in checks.values())
    if not ready:
        response.status_code = 503
        response.headers["Retry-After"] = "5"
    return Readiness(status="ready" if ready else "unavailable", checks=checks)


async def _check_database(resources: ResourcesDep) -> Check:
    started = time.perf_counter()
    try:
        async with asyncio.timeout(READY_TIMEOUT_SECONDS), resources.engine.connect() as conn:
            await conn.execute(text("select 1"))
    except Exception as exc:  # readiness reports any failure instead of raising it
        return Check(ok=False, latency_ms=_ms(started), error=type(exc).__name__)
    return Check(ok=True, latency_ms=_ms(started))


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)
