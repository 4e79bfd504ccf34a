"""Request and response models of the admin API."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.admin.stats import Statistics, Storage
from app.admin.tenants import TenantCounts
from app.db.models import AuditEntry, Tenant
from app.storable import Printable
from app.tenants import TENANT_ID_PATTERN
from app.usage import HourTraffic, TrafficWindows

TenantId = Annotated[str, StringConstraints(pattern=TENANT_ID_PATTERN)]
Name = Annotated[str, StringConstraints(min_length=1, max_length=200), Printable]
Status = Literal["active", "suspended"]


class TenantIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: TenantId
    name: Name | None = None
    tier: str = "basic"


class TenantPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: Name | None = None
    tier: str | None = None
    status: Status | None = None


class TenantOut(BaseModel):
    id: str
    name: str
    tier: str
    status: str
    created_at: datetime
    updated_at: datetime
    documents: int | None = Field(default=None, description="In lists and single reads.")
    chunks: int | None = None
    storage_bytes: int | None = Field(
        default=None,
        description="In lists and single reads: its estimated share of the tables and "
        "indexes, its dedicated index included (the stats' `storage.total_bytes`).",
    )

    @classmethod
    def of(
        cls, tenant: Tenant, counts: TenantCounts | None = None, storage: Storage | None = None
    ) -> Self:
        return cls(
            id=tenant.id,
            name=tenant.name,
            tier=tenant.tier,
            status=tenant.status,
            created_at=tenant.created_at,
            updated_at=tenant.updated_at,
            documents=counts.documents if counts else None,
            chunks=counts.chunks if counts else None,
            storage_bytes=storage.total_bytes if storage else None,
        )


class TenantList(BaseModel):
    items: list[TenantOut]
    total: int = Field(description="Tenants matching the filters, all pages.")
    limit: int
    offset: int


class StorageOut(BaseModel):
    """The tenant's share of the shared tables and indexes, in bytes (an estimate)."""

    table_bytes: int
    index_bytes: int
    dedicated_index_bytes: int = Field(description="Its own HNSW index, if `rag index` built one.")
    total_bytes: int
    rows: dict[str, int] = Field(description="Its rows per table.")


class TrafficOut(BaseModel):
    searches: int = Field(description="Searches and context requests (HTTP and MCP).")
    ingests: int = Field(description="Documents sent for ingestion.")
    rate_limited: int = Field(description="Requests refused with 429.")


class HourOut(TrafficOut):
    start: datetime = Field(description="The hour's first moment (UTC).")


class WindowsOut(BaseModel):
    last_hour: TrafficOut
    last_day: TrafficOut
    hourly: list[HourOut] = Field(
        description="The last 24 hours, oldest first, the current (partial) hour last."
    )

    @classmethod
    def of(cls, windows: TrafficWindows, hourly: Sequence[HourTraffic]) -> Self:
        return cls(
            last_hour=TrafficOut.model_validate(windows.last_hour, from_attributes=True),
            last_day=TrafficOut.model_validate(windows.last_day, from_attributes=True),
            hourly=[
                HourOut(
                    start=hour.start,
                    searches=hour.traffic.searches,
                    ingests=hour.traffic.ingests,
                    rate_limited=hour.traffic.rate_limited,
                )
                for hour in hourly
            ],
        )


class JobsOut(BaseModel):
    queued: int = Field(description="Ingestion jobs waiting for a worker.")
    running: int
    queued_bytes: int = Field(description="Input bytes still to ingest.")


class StatsOut(BaseModel):
    tenant_id: str
    documents: int
    chunks: int
    collections: int
    chunks_by_model: dict[str, int] = Field(description="Chunks per embedding model id.")
    storage: StorageOut
    traffic: WindowsOut = Field(description="Counted in 5-minute buckets.")
    jobs: JobsOut

    @classmethod
    def of(cls, tenant_id: str, found: Statistics) -> Self:
        storage, windows = found.storage, found.traffic
        return cls(
            tenant_id=tenant_id,
            documents=found.content.documents,
            chunks=found.content.chunks,
            collections=found.content.collections,
            chunks_by_model=found.content.chunks_by_model,
            storage=StorageOut(
                table_bytes=storage.table_bytes,
                index_bytes=storage.index_bytes,
                dedicated_index_bytes=storage.dedicated_index_bytes,
                total_bytes=storage.total_bytes,
                rows=storage.rows,
            ),
            traffic=WindowsOut.of(windows, found.hourly),
            jobs=JobsOut(
                queued=found.jobs.queued,
                running=found.jobs.running,
                queued_bytes=found.jobs.queued_bytes,
            ),
        )


class AuditOut(BaseModel):
    id: int
    at: datetime
    actor: str = Field(description="The token's `sub`, or `cli:<user>` for an operator.")
    actor_kind: Literal["token", "operator"] = Field(
        description="`token`: a bearer token acted (its `sub`, tenant and key id); `operator`: "
        "someone on the service's machine, through the command line."
    )
    actor_tenant_id: str | None
    actor_key_id: str | None = Field(description="The id (`kid`) of the key that verified "
                                     "the token; none for an operator.")  # fmt: skip
    action: str = Field(description="tenant.create, tenant.update, tenant.suspend, …")
    tenant_id: str | None
    before: dict[str, Any] | None
    after: dict[str, Any] | None

    @classmethod
    def of(cls, entry: AuditEntry) -> Self:
        return cls(
            id=entry.id,
            at=entry.at,
            actor=entry.actor_subject,
            actor_kind="operator" if entry.actor_kind == "operator" else "token",
            actor_tenant_id=entry.actor_tenant_id,
            actor_key_id=entry.actor_key_id,
            action=entry.action,
            tenant_id=entry.tenant_id,
            before=entry.before,
            after=entry.after,
        )


class AuditList(BaseModel):
    items: list[AuditOut]
    total: int
    limit: int
    offset: int


class TierOut(BaseModel):
    name: str
    requests: int = Field(description="Requests allowed per window.")
    window_seconds: int


class TierList(BaseModel):
    items: list[TierOut] = Field(description="Every tier a tenant may have (RAG_RATE_LIMIT_TIERS).")
