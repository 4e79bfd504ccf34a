"""Liveness and readiness."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from dataclasses import asdict

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field
from sqlalchemy import text

from app.api.deps import ResourcesDep
from app.resources import Resources

router = APIRouter(tags=["health"])
READY_TIMEOUT_SECONDS = 2.0


class Health(BaseModel):
    status: str


class Check(BaseModel):
    ok: bool
    latency_ms: float
    error: str | None = None


class ReplicaOut(BaseModel):
    """A read replica as the last background check (or a failed read since) left it."""

    name: str = Field(description="replica-N: the Nth of RAG_DATABASE_REPLICA_URLS.")
    healthy: bool = Field(description="Serving reads now.")
    reason: str | None = Field(description="Why not, when it is skipped.")
    lag_seconds: float | None
    lag_bytes: int | None = Field(description="WAL the replica has not replayed yet.")
    in_flight: int
    served: int = Field(description="Reads it has answered since the process started.")
    failed_reads: int = Field(description="Reads it failed, each retried on the primary.")


class Readiness(BaseModel):
    status: str
    checks: dict[str, Check]
    replicas: list[ReplicaOut] = Field(
        default=[],
        description="Read replicas; informative only: the primary alone keeps the service ready.",
    )


@router.get("/healthz", summary="Liveness")
async def healthz() -> Health:
    """The process is up and serving."""
    return Health(status="ok")


@router.get(
    "/readyz",
    summary="Readiness: database, Redis, embedder",
    responses={
        503: {
            "model": Readiness,
            "description": "A dependency does not answer",
            "headers": {"Retry-After": {"schema": {"type": "integer"}}},
        }
    },
)
async def readyz(resources: ResourcesDep, response: Response) -> Readiness:
    """The database, Redis (when configured) and the embedder answer; and how the read
    replicas are doing (a replica down or behind is skipped, it never makes this fail)."""
    checks = {"database": await _timed(_ping_database(resources))}
    if resources.redis is not None:
        checks["redis"] = await _timed(_ping_redis(resources))
    checks["embedder"] = await _timed(resources.embedder.check())
    ready = all(check.ok for check in checks.values())
    if not ready:
        response.status_code = 503
        response.headers["Retry-After"] = "5"
    replicas = [ReplicaOut(**asdict(r)) for r in resources.replicas.statuses()]
    return Readiness(status="ready" if ready else "unavailable", checks=checks, replicas=replicas)


async def _ping_database(resources: Resources) -> None:
    async with resources.engine.connect() as conn:
        await conn.execute(text("select 1"))


async def _ping_redis(resources: Resources) -> None:
    assert resources.redis is not None
    await resources.redis.ping()


async def _timed(check: Awaitable[None]) -> Check:
    started = time.perf_counter()
    try:
        async with asyncio.timeout(READY_TIMEOUT_SECONDS):
            await check
    except Exception as exc:  # readiness reports any failure instead of raising it
        return Check(ok=False, latency_ms=_ms(started), error=type(exc).__name__)
    return Check(ok=True, latency_ms=_ms(started))


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)
