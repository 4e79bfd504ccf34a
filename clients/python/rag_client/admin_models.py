"""Typed replies of the admin API (scope `rag:admin`)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Literal

from pydantic import Field, JsonValue

from rag_client.models import Body, Reply


class NewTenant(Body):
    id: str
    name: str | None = None
    tier: str | None = None


class TenantStatus(StrEnum):
    ACTIVE = "active"
    SUSPENDED = "suspended"


class TenantChange(Body):
    name: str | None = None
    tier: str | None = None
    status: TenantStatus | None = None


class Tenant(Reply):
    id: str
    name: str
    tier: str
    status: str
    created_at: datetime
    updated_at: datetime
    documents: int | None = None
    chunks: int | None = None
    storage_bytes: int | None = None  # estimated; in lists and single reads


class TenantPage(Reply):
    items: list[Tenant]
    limit: int
    offset: int
    total: int | None = None


class Storage(Reply):
    """The tenant's share of the shared tables and indexes, in bytes (an estimate)."""

    table_bytes: int
    index_bytes: int
    dedicated_index_bytes: int
    total_bytes: int
    rows: dict[str, int]


class Traffic(Reply):
    searches: int
    ingests: int
    rate_limited: int


class HourTraffic(Traffic):
    start: datetime  # the hour's first moment (UTC)


class TrafficWindows(Reply):
    last_hour: Traffic
    last_day: Traffic
    hourly: list[HourTraffic] = Field(default_factory=list)  # the last 24 h, oldest first


class JobCounts(Reply):
    """A tenant's background ingestion jobs not yet done."""

    queued: int
    running: int
    queued_bytes: int


class TenantStats(Reply):
    tenant_id: str
    documents: int
    chunks: int
    collections: int
    chunks_by_model: dict[str, int]
    storage: Storage | None = None
    traffic: TrafficWindows | None = None
    jobs: JobCounts | None = None


class AuditEntry(Reply):
    """One admin action: who (`actor`: a token's subject, or `cli:<user>` when `actor_kind` is
    `operator`), when, what, before and after."""

    id: int
    at: datetime
    actor: str
    actor_kind: Literal["token", "operator"] = "token"
    actor_tenant_id: str | None = None
    actor_key_id: str | None = None
    action: str
    tenant_id: str | None = None
    before: dict[str, JsonValue] | None = None
    after: dict[str, JsonValue] | None = None


class AuditPage(Reply):
    items: list[AuditEntry]
    limit: int
    offset: int
    total: int | None = None


class Tier(Reply):
    name: str
    requests: int  # allowed per window
    window_seconds: int


class TierList(Reply):
    items: list[Tier]
