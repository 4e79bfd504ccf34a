"""Liveness and readiness."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
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
    replicas are doing (a replica down or behind is skipped, it never makes this fail). Only
    what the instance cannot serve without is checked: an optional stage (the reranker)
    failing is a metric and a log line, never a 503."""
    checks = {"database": await _timed(lambda: _ping_database(resources), attempts=2)}
    if resources.redis is not None:
        checks["redis"] = await _timed(lambda: _ping_redis(resources), attempts=2)
    checks["embedder"] = await _timed(resources.embedder.check)
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


async def _timed(check: Callable[[], Awaitable[None]], *, attempts: int = 1) -> Check:
    """`check` within READY_TIMEOUT_SECONDS, tried up to `attempts` times. A pooled connection
    that died with its server (PostgreSQL or Redis restarted) fails the first try and is
    dropped by the pool, so the second try is on a new one: a server that is up is never
    reported down for a connection it no longer has (a load balancer would take the instance
    out for nothing). A server that is down fails both tries."""
    started = time.perf_counter()
    try:
        async with asyncio.timeout(READY_TIMEOUT_SECONDS):
            for attempt in range(1, attempts + 1):
                try:
                    await check()
                    break
                except Exception:
                    if attempt == attempts:
                        raise
    except Exception as exc:  # readiness reports any failure instead of raising it
        return Check(ok=False, latency_ms=_ms(started), error=type(exc).__name__)
    return Check(ok=True, latency_ms=_ms(started))


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)
